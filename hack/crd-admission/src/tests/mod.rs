//! Unit tests: the behaviour of admission, named as a specification.

use serde_json::{json, Value};

use crate::{invalid_status, Admission, FieldErrorKind};

mod cel_rules;

/// A resource schema whose `spec` has the given schema.
fn with_spec(spec: Value) -> Admission {
    Admission::new(&json!({"type": "object", "properties": {"spec": spec}}))
        .expect("schema compiles")
}

fn resource(spec: Value) -> Value {
    json!({"apiVersion": "middleware.fedstate.io/v1alpha1", "kind": "MongoDB",
           "metadata": {"name": "demo", "namespace": "ns"}, "spec": spec})
}

/// One CEL validation rule with its message, as `x-kubernetes-validations`.
fn rule(rule: &str, message: &str) -> Value {
    json!([{"rule": rule, "message": message}])
}

/// The errors as kube-apiserver prints them (`field.Error.Error()`).
fn refusals(adm: &Admission, obj: &mut Value, old: Option<&Value>) -> Vec<String> {
    match adm.admit(obj, old) {
        Ok(()) => Vec::new(),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

fn admits(adm: &Admission, obj: &mut Value, old: Option<&Value>) {
    let got = refusals(adm, obj, old);
    assert!(got.is_empty(), "unexpected refusal: {got:?}");
}

fn refuses_with(adm: &Admission, mut obj: Value, old: Option<&Value>, expected: &[&str]) {
    assert_eq!(refusals(adm, &mut obj, old), expected);
}

// ---------------------------------------------------------------- defaults

#[test]
fn defaults_are_applied_to_absent_fields_at_nested_levels() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "integer", "default": 3},
        "storage": {"type": "object", "properties": {
            "size": {"type": "string", "default": "1Gi"},
            "class": {"type": "string"}}}}}));
    let mut obj = resource(json!({"storage": {}}));
    admits(&adm, &mut obj, None);
    assert_eq!(
        obj["spec"],
        json!({"members": 3, "storage": {"size": "1Gi"}})
    );
}

#[test]
fn defaults_below_an_absent_parent_without_default_are_not_applied() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "storage": {"type": "object", "properties": {"size": {"type": "string", "default": "1Gi"}}}}}));
    let mut obj = resource(json!({}));
    admits(&adm, &mut obj, None);
    assert_eq!(obj["spec"], json!({}));
}

#[test]
fn a_defaulted_parent_gets_the_defaults_of_its_children() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "storage": {"type": "object", "default": {}, "properties": {
            "size": {"type": "string", "default": "1Gi"}}}}}));
    let mut obj = resource(json!({}));
    admits(&adm, &mut obj, None);
    assert_eq!(obj["spec"], json!({"storage": {"size": "1Gi"}}));
}

#[test]
fn defaults_apply_inside_list_items_and_map_values() {
    let item = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "votes": {"type": "integer", "default": 1}}});
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "array", "items": item.clone()},
        "byName": {"type": "object", "additionalProperties": item}}}));
    let mut obj = resource(
        json!({"members": [{"name": "a"}, {"name": "b", "votes": 0}],
                                  "byName": {"x": {}}}),
    );
    admits(&adm, &mut obj, None);
    assert_eq!(
        obj["spec"]["members"],
        json!([{"name": "a", "votes": 1}, {"name": "b", "votes": 0}])
    );
    assert_eq!(obj["spec"]["byName"], json!({"x": {"votes": 1}}));
}

#[test]
fn a_null_non_nullable_field_with_a_default_gets_the_default() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "integer", "default": 3}}}));
    let mut obj = resource(json!({"members": null}));
    admits(&adm, &mut obj, None);
    assert_eq!(obj["spec"]["members"], json!(3));
}

#[test]
fn a_null_non_nullable_field_without_default_is_dropped_and_a_nullable_one_kept() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "string", "nullable": true}}}));
    let mut obj = resource(json!({"a": null, "b": null}));
    admits(&adm, &mut obj, None);
    assert_eq!(obj["spec"], json!({"b": null}));
}

#[test]
fn a_required_field_is_satisfied_by_its_default() {
    let adm = with_spec(
        json!({"type": "object", "required": ["members"], "properties": {
        "members": {"type": "integer", "default": 3}}}),
    );
    admits(&adm, &mut resource(json!({})), None);
}

// ---------------------------------------------------------------- pruning

#[test]
fn unknown_fields_are_pruned_and_reported() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "integer"},
        "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}}}));
    let mut obj = resource(json!({"members": 1, "bogus": true, "list": [{"a": "x", "b": "y"}]}));
    obj["status"] = json!({"x": 1});
    let admitted = adm.admit_reporting(&mut obj, None).expect("admitted");
    assert_eq!(obj["spec"], json!({"members": 1, "list": [{"a": "x"}]}));
    assert!(obj.get("status").is_none());
    let mut unknown = admitted.unknown_fields;
    unknown.sort();
    assert_eq!(unknown, ["spec.bogus", "spec.list[0].b", "status"]);
}

#[test]
fn api_version_kind_and_metadata_are_never_pruned_at_the_root() {
    let adm = with_spec(json!({"type": "object"}));
    let mut obj = resource(json!({}));
    obj["metadata"]["labels"] = json!({"app": "x"});
    let before = obj.clone();
    admits(&adm, &mut obj, None);
    assert_eq!(obj, before);
}

#[test]
fn preserve_unknown_fields_keeps_unknown_fields_but_prunes_specified_ones() {
    let adm = with_spec(
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
    );
    let mut obj = resource(json!({"free": {"anything": [1, 2]}, "known": {"a": "x", "b": "y"}}));
    admits(&adm, &mut obj, None);
    assert_eq!(
        obj["spec"],
        json!({"free": {"anything": [1, 2]}, "known": {"a": "x"}})
    );
}

#[test]
fn an_embedded_resource_keeps_its_api_version_kind_and_metadata() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}}}));
    let mut obj = resource(json!({"template": {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"}, "spec": {"x": "1", "y": "2"}, "other": 1}}));
    admits(&adm, &mut obj, None);
    assert_eq!(
        obj["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p"}, "spec": {"x": "1"}})
    );
}

#[test]
fn an_embedded_resource_needs_api_version_and_kind() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "x-kubernetes-preserve-unknown-fields": true}}}));
    admits(
        &adm,
        &mut resource(json!({"template": {"apiVersion": "v1", "kind": "Pod", "spec": {"x": 1}}})),
        None,
    );
    refuses_with(
        &adm,
        resource(json!({"template": {"kind": ""}})),
        None,
        &[
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Invalid value: \"\": must not be empty",
        ],
    );
}

#[test]
fn int_or_string_accepts_integers_and_strings_and_refuses_others() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "port": {"x-kubernetes-int-or-string": true}}}));
    admits(&adm, &mut resource(json!({"port": 27017})), None);
    admits(&adm, &mut resource(json!({"port": "mongodb"})), None);
    refuses_with(&adm, resource(json!({"port": true})), None, &[
        "<nil>: Invalid value: \"\": \"spec.port\" must validate at least one schema (anyOf)",
        "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer: \"boolean\"",
    ]);
}

// ---------------------------------------------------------------- schema validation

#[test]
fn a_wrong_type_is_refused_as_kube_apiserver_words_it() {
    let adm = with_spec(json!({"type": "object", "properties": {"members": {"type": "integer"}}}));
    refuses_with(&adm, resource(json!({"members": "three"})), None, &[
        "spec.members: Invalid value: \"string\": spec.members in body must be of type integer: \"string\"",
    ]);
}

#[test]
fn an_integral_float_is_an_integer_and_an_integer_is_a_number() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "integer"}, "ratio": {"type": "number"}}}));
    admits(
        &adm,
        &mut resource(json!({"members": 3.0, "ratio": 1})),
        None,
    );
    refuses_with(&adm, resource(json!({"members": 1.5})), None, &[
        "spec.members: Invalid value: \"number\": spec.members in body must be of type integer: \"number\"",
    ]);
}

#[test]
fn null_list_items_are_refused_unless_nullable() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "string"}},
        "b": {"type": "array", "items": {"type": "string", "nullable": true}}}}));
    refuses_with(&adm, resource(json!({"a": ["x", null], "b": [null]})), None, &[
        "spec.a[1]: Invalid value: \"null\": spec.a[1] in body must be of type string: \"null\"",
    ]);
}

#[test]
fn a_value_outside_the_enum_is_unsupported() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "mode": {"type": "string", "enum": ["ReplicaSet", "Standalone"]},
        "level": {"type": "integer", "enum": [1, 2]}}}));
    admits(
        &adm,
        &mut resource(json!({"mode": "Standalone", "level": 2})),
        None,
    );
    refuses_with(&adm, resource(json!({"mode": "Sharded", "level": 3})), None, &[
        "spec.level: Unsupported value: 3: supported values: \"1\", \"2\"",
        "spec.mode: Unsupported value: \"Sharded\": supported values: \"ReplicaSet\", \"Standalone\"",
    ]);
}

#[test]
fn minimum_and_maximum_bound_integers() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "integer", "minimum": 0, "maximum": 7}}}));
    admits(&adm, &mut resource(json!({"members": 0})), None);
    admits(&adm, &mut resource(json!({"members": 7})), None);
    refuses_with(&adm, resource(json!({"members": -1})), None, &[
        "spec.members: Invalid value: -1: spec.members in body should be greater than or equal to 0",
    ]);
    refuses_with(&adm, resource(json!({"members": 8})), None, &[
        "spec.members: Invalid value: 8: spec.members in body should be less than or equal to 7",
    ]);
}

#[test]
fn exclusive_bounds_exclude_the_limit() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true,
                  "maximum": 1.5, "exclusiveMaximum": true}}}));
    admits(&adm, &mut resource(json!({"ratio": 0.5})), None);
    refuses_with(
        &adm,
        resource(json!({"ratio": 0})),
        None,
        &["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"],
    );
    refuses_with(
        &adm,
        resource(json!({"ratio": 1.5})),
        None,
        &["spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5"],
    );
}

#[test]
fn multiple_of_is_checked() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "size": {"type": "integer", "multipleOf": 4}}}));
    admits(&adm, &mut resource(json!({"size": 8})), None);
    refuses_with(
        &adm,
        resource(json!({"size": 6})),
        None,
        &["spec.size: Invalid value: 6: spec.size in body should be a multiple of 4"],
    );
}

#[test]
fn string_length_is_bounded() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 4}}}));
    admits(&adm, &mut resource(json!({"name": "abcd"})), None);
    refuses_with(
        &adm,
        resource(json!({"name": "a"})),
        None,
        &["spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long"],
    );
    refuses_with(
        &adm,
        resource(json!({"name": "abcde"})),
        None,
        &["spec.name: Too long: may not be more than 4 bytes"],
    );
}

#[test]
fn list_length_is_bounded() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "hosts": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}}}}));
    refuses_with(
        &adm,
        resource(json!({"hosts": []})),
        None,
        &["spec.hosts: Invalid value: 0: spec.hosts in body should have at least 1 items"],
    );
    refuses_with(
        &adm,
        resource(json!({"hosts": ["a", "b", "c"]})),
        None,
        &["spec.hosts: Too many: 3: must have at most 2 items"],
    );
}

#[test]
fn property_count_is_bounded() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "labels": {"type": "object", "minProperties": 1, "maxProperties": 1,
                   "additionalProperties": {"type": "string"}}}}));
    refuses_with(
        &adm,
        resource(json!({"labels": {}})),
        None,
        &["spec.labels: Invalid value: 0: spec.labels in body should have at least 1 properties"],
    );
    refuses_with(
        &adm,
        resource(json!({"labels": {"a": "1", "b": "2"}})),
        None,
        &["spec.labels: Too many: 2: must have at most 1 item"],
    );
}

#[test]
fn a_pattern_mismatch_is_invalid() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$"}}}));
    admits(&adm, &mut resource(json!({"name": "abc"})), None);
    refuses_with(
        &adm,
        resource(json!({"name": "Abc"})),
        None,
        &["spec.name: Invalid value: \"Abc\": spec.name in body should match '^[a-z]+$'"],
    );
}

#[test]
fn a_missing_required_field_is_a_required_value() {
    let adm = Admission::new(&json!({"type": "object", "required": ["spec"], "properties": {
        "spec": {"type": "object", "required": ["members"], "properties": {"members": {"type": "integer"}}}}}))
    .unwrap();
    let mut obj = resource(json!({}));
    let errs = adm.admit(&mut obj, None).unwrap_err();
    assert_eq!(errs[0].kind, FieldErrorKind::Required);
    assert_eq!(errs[0].to_string(), "spec.members: Required value");
    let mut no_spec = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "x"}});
    assert_eq!(refusals(&adm, &mut no_spec, None), ["spec: Required value"]);
}

#[test]
fn string_formats_are_checked() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "ip": {"type": "string", "format": "ipv4"},
        "at": {"type": "string", "format": "date-time"},
        "free": {"type": "string", "format": "something-else"}}}));
    admits(
        &adm,
        &mut resource(json!({"ip": "10.0.0.1", "at": "2024-01-02T03:04:05Z", "free": "x"})),
        None,
    );
    refuses_with(&adm, resource(json!({"ip": "10.0.0", "at": "yesterday"})), None, &[
        "spec.at: Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\"",
        "spec.ip: Invalid value: \"10.0.0\": spec.ip in body must be of type ipv4: \"10.0.0\"",
    ]);
}

#[test]
fn an_int32_format_does_not_bound_the_value_but_words_type_errors() {
    // kube-openapi gives its number validator no format: ranges are not checked.
    let adm = with_spec(json!({"type": "object", "properties": {
        "port": {"type": "integer", "format": "int32"}}}));
    admits(&adm, &mut resource(json!({"port": 2147483648_i64})), None);
    refuses_with(
        &adm,
        resource(json!({"port": true})),
        None,
        &["spec.port: Invalid value: \"\": spec.port in body must be of type int32: \"\""],
    );
    refuses_with(&adm, resource(json!({"port": 1.5})), None, &[
        "spec.port: Invalid value: \"float64\": spec.port in body must be of type int32: \"float64\"",
    ]);
}

#[test]
fn set_lists_refuse_duplicate_items() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}));
    admits(&adm, &mut resource(json!({"tags": ["a", "b"]})), None);
    refuses_with(
        &adm,
        resource(json!({"tags": ["a", "b", "a"]})),
        None,
        &["spec.tags[2]: Duplicate value: \"a\""],
    );
}

#[test]
fn map_lists_refuse_duplicate_keys() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["host"],
            "items": {"type": "object", "required": ["host"], "properties": {
                "host": {"type": "string"}, "votes": {"type": "integer"}}}}}}));
    admits(
        &adm,
        &mut resource(json!({"members": [{"host": "a"}, {"host": "b"}]})),
        None,
    );
    refuses_with(
        &adm,
        resource(json!({"members": [{"host": "a", "votes": 1}, {"host": "a", "votes": 0}]})),
        None,
        &["spec.members[1]: Duplicate value: {\"host\":\"a\"}"],
    );
}

#[test]
fn list_invariants_are_not_checked_on_update_if_the_stored_object_broke_them() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "members": {"type": "integer"}}}));
    let old = resource(json!({"tags": ["a", "a"], "members": 1}));
    let mut new = resource(json!({"tags": ["a", "a", "b", "b"], "members": 2}));
    admits(&adm, &mut new, Some(&old));
    let clean = resource(json!({"tags": ["a"]}));
    refuses_with(
        &adm,
        resource(json!({"tags": ["a", "a"]})),
        Some(&clean),
        &["spec.tags[1]: Duplicate value: \"a\""],
    );
}

#[test]
fn prior_errors_come_first_and_block_cel_rules() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"}},
        "x-kubernetes-validations": rule("self.members > 0", "positive")}),
    );
    let prior = crate::FieldError {
        field: "metadata.name".into(),
        kind: FieldErrorKind::Required,
        bad_value: None,
        detail: "name or generateName is required".into(),
    };
    let mut obj = resource(json!({"members": 0}));
    let errs = adm.admit_with(&mut obj, None, vec![prior]).unwrap_err();
    let printed: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert_eq!(printed, [
        "metadata.name: Required value: name or generateName is required",
        "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
    ]);
}

#[test]
fn unchanged_invalid_values_are_ratcheted_on_update() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 3}, "members": {"type": "integer", "minimum": 0}}}));
    let old = resource(json!({"name": "toolong", "members": 1}));
    admits(
        &adm,
        &mut resource(json!({"name": "toolong", "members": 2})),
        Some(&old),
    );
    refuses_with(&adm, resource(json!({"name": "toolong", "members": -1})), Some(&old), &[
        "spec.members: Invalid value: -1: spec.members in body should be greater than or equal to 0",
    ]);
}

#[test]
fn map_values_are_validated_with_additional_properties() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "limits": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}}}}));
    refuses_with(&adm, resource(json!({"limits": {"cpu": 0}})), None, &[
        "spec.limits.cpu: Invalid value: 0: spec.limits.cpu in body should be greater than or equal to 1",
    ]);
}

// ---------------------------------------------------------------- schema compilation and robustness

#[test]
fn a_rule_that_does_not_compile_refuses_the_schema() {
    let e = Admission::new(
        &json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.x >"}]}),
    )
    .unwrap_err();
    assert_eq!(e.path, "openAPIV3Schema.x-kubernetes-validations[0].rule");
}

#[test]
fn a_field_path_outside_the_schema_refuses_the_schema() {
    let e = Admission::new(
        &json!({"type": "object", "properties": {"a": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".b"}]}),
    )
    .unwrap_err();
    assert_eq!(e.message, "does not refer to a valid field");
}

#[test]
fn malformed_schemas_are_errors_not_panics() {
    for bad in [
        json!(1),
        json!({"type": 3}),
        json!({"pattern": "("}),
        json!({"properties": []}),
        json!({"items": [{}]}),
        json!({"x-kubernetes-list-type": "map"}),
        json!({"x-kubernetes-validations": [{"message": "no rule"}]}),
    ] {
        assert!(Admission::new(&bad).is_err(), "{bad}");
    }
}

#[test]
fn odd_values_are_refused_not_panics() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "date-time"},
        "n": {"type": "integer", "multipleOf": -1}, "f": {"type": "number", "multipleOf": 0}}}));
    let mut obj =
        resource(json!({"day": "２０２４-01", "at": "2024-01-02T０", "n": i64::MIN, "f": 1.5}));
    let errs = adm.admit(&mut obj, None).unwrap_err();
    assert_eq!(errs.len(), 3, "{errs:?}");
}

#[test]
fn malformed_objects_are_refused_not_panics() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"},
        "list": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}},
        "x-kubernetes-validations": rule("self.members > 0", "positive")}),
    );
    for mut obj in [
        json!(null),
        json!([1, 2]),
        json!("x"),
        resource(json!([])),
        resource(json!({"list": "notalist"})),
        resource(json!({"list": [1, null, {"a": 1}]})),
    ] {
        let _ = adm.admit(&mut obj, Some(&json!({"spec": 3})));
    }
}

// ---------------------------------------------------------------- the 422 Status

#[test]
fn the_status_is_the_422_invalid_status_kube_apiserver_returns() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer", "minimum": 0}}}),
    );
    let mut obj = resource(json!({"members": -1}));
    let errs = adm.admit(&mut obj, None).unwrap_err();
    assert_eq!(
        invalid_status("MongoDB", "middleware.fedstate.io", "demo", &errs),
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "MongoDB.middleware.fedstate.io \"demo\" is invalid: spec.members: Invalid value: -1: spec.members in body should be greater than or equal to 0",
            "reason": "Invalid",
            "details": {
                "name": "demo",
                "group": "middleware.fedstate.io",
                "kind": "MongoDB",
                "causes": [{
                    "reason": "FieldValueInvalid",
                    "message": "Invalid value: -1: spec.members in body should be greater than or equal to 0",
                    "field": "spec.members"
                }]
            },
            "code": 422
        })
    );
}

#[test]
fn several_errors_are_bracketed_and_deduplicated_in_the_status_message() {
    let adm = with_spec(
        json!({"type": "object", "required": ["a", "b"], "properties": {
        "a": {"type": "string"}, "b": {"type": "string"}}}),
    );
    let mut obj = resource(json!({}));
    let mut errs = adm.admit(&mut obj, None).unwrap_err();
    errs.push(errs[0].clone());
    let status = invalid_status("MongoDB", "middleware.fedstate.io", "demo", &errs);
    assert_eq!(status["message"],
        "MongoDB.middleware.fedstate.io \"demo\" is invalid: [spec.a: Required value, spec.b: Required value]");
    assert_eq!(
        status["details"]["causes"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
}

#[test]
fn bad_values_print_as_go_prints_them() {
    use crate::errors::{go_float, go_value};
    assert_eq!(go_value(&json!("a\"b\n")), "\"a\\\"b\\n\"");
    assert_eq!(
        go_value(&json!({"b": 1, "a": "<"})),
        "{\"a\":\"\\u003c\",\"b\":1}"
    );
    assert_eq!(go_float(1e6), "1e+06");
    assert_eq!(go_float(123456.0), "123456");
    assert_eq!(go_float(0.5), "0.5");
    assert_eq!(go_float(1e-5), "1e-05");
}

#[test]
fn admission_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Admission>();
}
