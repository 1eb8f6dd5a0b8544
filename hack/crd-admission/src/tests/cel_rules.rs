//! CEL validation rules: `x-kubernetes-validations` as kube-apiserver
//! evaluates them, transition rules and the quantity library included.

use serde_json::json;

use super::*;

#[test]
fn a_true_rule_admits_and_a_false_rule_refuses_with_its_message() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"}},
        "x-kubernetes-validations": rule("self.members % 2 == 1", "members must be odd")}),
    );
    admits(&adm, &mut resource(json!({"members": 3})), None);
    refuses_with(
        &adm,
        resource(json!({"members": 2})),
        None,
        &["spec: Invalid value: \"object\": members must be odd"],
    );
}

#[test]
fn a_rule_without_message_reports_the_rule() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.members > 0"}]}),
    );
    refuses_with(
        &adm,
        resource(json!({"members": 0})),
        None,
        &["spec: Invalid value: \"object\": failed rule: self.members > 0"],
    );
}

#[test]
fn a_rule_on_a_scalar_reports_the_scalar_type_and_path() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"name": {"type": "string",
        "x-kubernetes-validations": rule("self.startsWith('mongo')", "name must start with mongo")}}}),
    );
    refuses_with(
        &adm,
        resource(json!({"name": "redis"})),
        None,
        &["spec.name: Invalid value: \"string\": name must start with mongo"],
    );
}

#[test]
fn a_rule_at_the_root_sees_metadata_and_reports_the_nil_path() {
    let adm = Admission::new(&json!({"type": "object", "properties": {"spec": {"type": "object"}},
        "x-kubernetes-validations": rule("self.metadata.name.size() <= 5 && self.kind == 'MongoDB'", "name too long")}))
    .unwrap();
    admits(&adm, &mut resource(json!({})), None);
    let mut obj = resource(json!({}));
    obj["metadata"]["name"] = json!("toolongname");
    assert_eq!(
        refusals(&adm, &mut obj, None),
        ["<nil>: Invalid value: \"object\": name too long"]
    );
}

#[test]
fn field_path_and_reason_shape_the_error() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.members <= 7", "message": "at most 7 members",
                                      "fieldPath": ".members", "reason": "FieldValueForbidden"}]}),
    );
    let mut obj = resource(json!({"members": 9}));
    let errs = adm.admit(&mut obj, None).unwrap_err();
    assert_eq!(errs[0].kind, FieldErrorKind::Forbidden);
    assert_eq!(
        errs[0].to_string(),
        "spec.members: Forbidden: at most 7 members"
    );
}

#[test]
fn message_expression_builds_the_message() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.members <= 7", "message": "static",
            "messageExpression": "'members is ' + string(self.members) + ', at most 7'"}]}),
    );
    refuses_with(
        &adm,
        resource(json!({"members": 9})),
        None,
        &["spec: Invalid value: \"object\": members is 9, at most 7"],
    );
}

#[test]
fn a_transition_rule_refuses_a_change_on_update_and_is_ignored_on_create() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "rsName": {"type": "string",
                   "x-kubernetes-validations": rule("self == oldSelf", "rsName is immutable")}}}));
    admits(&adm, &mut resource(json!({"rsName": "rs0"})), None);
    let old = resource(json!({"rsName": "rs0"}));
    admits(&adm, &mut resource(json!({"rsName": "rs0"})), Some(&old));
    refuses_with(
        &adm,
        resource(json!({"rsName": "rs1"})),
        Some(&old),
        &["spec.rsName: Invalid value: \"string\": rsName is immutable"],
    );
}

#[test]
fn a_transition_rule_is_skipped_where_the_old_object_had_no_value() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "rsName": {"type": "string",
                   "x-kubernetes-validations": rule("self == oldSelf", "rsName is immutable")}}}));
    let old = resource(json!({}));
    admits(&adm, &mut resource(json!({"rsName": "rs1"})), Some(&old));
}

#[test]
fn a_quantity_transition_rule_refuses_a_decrease_whatever_the_notation() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "storage": {"type": "string", "x-kubernetes-validations": rule(
            "quantity(self).compareTo(quantity(oldSelf)) >= 0",
            "storage may not shrink")}}}));
    let old = resource(json!({"storage": "1Gi"}));
    admits(&adm, &mut resource(json!({"storage": "1Gi"})), None);
    for bigger_or_same in ["1Gi", "1073741824", "2Gi", "1.5Gi", "1.1G"] {
        admits(
            &adm,
            &mut resource(json!({"storage": bigger_or_same})),
            Some(&old),
        );
    }
    for smaller in ["1G", "1023Mi", "512Mi"] {
        refuses_with(
            &adm,
            resource(json!({"storage": smaller})),
            Some(&old),
            &["spec.storage: Invalid value: \"string\": storage may not shrink"],
        );
    }
}

#[test]
fn an_unparseable_quantity_is_the_go_parse_error_evaluating_the_rule() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "storage": {"type": "string",
                    "x-kubernetes-validations": rule("quantity(self).isGreaterThan(quantity('0'))", "positive")},
        "limit": {"type": "string",
                  "x-kubernetes-validations": [{"rule": "quantity(self).sign() == 1"}]}}}));
    refuses_with(
        &adm,
        resource(json!({"storage": "ten gigs"})),
        None,
        &["spec.storage: Invalid value: \"string\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: positive"],
    );
    refuses_with(
        &adm,
        resource(json!({"storage": "200K"})),
        None,
        &["spec.storage: Invalid value: \"string\": unable to parse quantity's suffix evaluating rule: positive"],
    );
    // `sign` is a global function, not a member (`cel.Overload`): kube-apiserver
    // refuses such a rule when it type-checks the CRD; here it fails on evaluation.
    let got = refusals(&adm, &mut resource(json!({"limit": "1Gi"})), None);
    assert!(
        got.len() == 1
            && got[0].starts_with("spec.limit: Invalid value: \"string\": ")
            && got[0].contains("sign"),
        "{got:?}"
    );
}

#[test]
fn the_quantity_library_converts_compares_and_adds() {
    let checks = [
        "isQuantity('1.3Gi') && isQuantity('10000k') && !isQuantity('1,3G') && !isQuantity('200K') && !isQuantity('Three')",
        "quantity('200M').compareTo(quantity('0.2G')) == 0",
        "quantity('50M').compareTo(quantity('50Mi')) == -1 && quantity('50Mi').compareTo(quantity('50M')) == 1",
        "quantity('150Mi').isGreaterThan(quantity('100Mi')) && !quantity('50Mi').isGreaterThan(quantity('100Mi'))",
        "quantity('50M').isLessThan(quantity('100M')) && !quantity('100M').isLessThan(quantity('50M'))",
        "quantity('50000000G').isInteger() && quantity('50k').asInteger() == 50000",
        "!quantity('9999999999999999999999999999999999999G').isInteger()",
        "quantity('50k').sub(20000).asApproximateFloat() == 30000.0",
        "quantity('50k').add(quantity('20k')) == quantity('70k') && quantity('50k').add(20) == quantity('50020')",
        "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
        "sign(quantity('-1m')) == -1 && sign(quantity('0')) == 0 && sign(quantity('1Ki')) == 1",
        "quantity('1Gi') == quantity('1073741824') && quantity('1G') != quantity('1Gi')",
        "type(quantity('1')) == kubernetes.Quantity",
    ];
    for check in checks {
        let adm = with_spec(
            json!({"type": "object", "properties": {"n": {"type": "integer"}},
            "x-kubernetes-validations": rule(check, "failed")}),
        );
        admits(&adm, &mut resource(json!({"n": 1})), None);
    }
    let adm = with_spec(
        json!({"type": "object", "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": rule("quantity('9999999999999999999999999999999999999G').asInteger() > 0", "big")}),
    );
    refuses_with(
        &adm,
        resource(json!({"n": 1})),
        None,
        &["spec: Invalid value: \"object\": cannot convert value to integer evaluating rule: big"],
    );
}

#[test]
fn an_optional_old_self_rule_also_runs_on_create() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "oldSelf.hasValue() || self.members == 1",
            "message": "start with one member", "optionalOldSelf": true}]}),
    );
    admits(&adm, &mut resource(json!({"members": 1})), None);
    refuses_with(
        &adm,
        resource(json!({"members": 3})),
        None,
        &["spec: Invalid value: \"object\": start with one member"],
    );
    let old = resource(json!({"members": 1}));
    admits(&adm, &mut resource(json!({"members": 3})), Some(&old));
}

#[test]
fn json_integers_are_cel_ints_not_uints() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "integer"}, "name": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": "self.members >= 0", "message": "non-negative"},
            {"rule": "size(self.name) < 64", "message": "short name"},
            {"rule": "self.members + 1 > 1 && self.members - 5 < 0", "message": "int arithmetic"},
            {"rule": "type(self.members) == int", "message": "int type"},
            {"rule": "self.members == 3 ? int('3') == self.members : true", "message": "int()"}]}));
    admits(
        &adm,
        &mut resource(json!({"members": 3, "name": "demo"})),
        None,
    );
}

#[test]
fn number_fields_are_cel_doubles() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"ratio": {"type": "number"}},
        "x-kubernetes-validations": rule("self.ratio > 0.5", "ratio above half")}),
    );
    admits(&adm, &mut resource(json!({"ratio": 1})), None);
}

#[test]
fn absent_optional_fields_are_absent_in_cel() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "tls": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}},
        "x-kubernetes-validations": rule("!has(self.tls) || has(self.tls.enabled)", "tls.enabled required with tls")}));
    admits(&adm, &mut resource(json!({})), None);
    admits(&adm, &mut resource(json!({"tls": {"enabled": true}})), None);
    refuses_with(
        &adm,
        resource(json!({"tls": {}})),
        None,
        &["spec: Invalid value: \"object\": tls.enabled required with tls"],
    );
}

#[test]
fn null_valued_fields_are_absent_in_cel() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "note": {"type": "string", "nullable": true}},
        "x-kubernetes-validations": rule("!has(self.note)", "note must be unset")}));
    admits(&adm, &mut resource(json!({"note": null})), None);
}

#[test]
fn kubernetes_cel_functions_and_macros_are_available() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "name": {"type": "string"}, "hosts": {"type": "array", "items": {"type": "string"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
        "x-kubernetes-validations": [
            {"rule": "self.name.matches('^[a-z]+$')"},
            {"rule": "self.name.startsWith('mo') && self.name.endsWith('db') && self.name.contains('ng')"},
            {"rule": "self.hosts.all(h, h.endsWith(':27017'))"},
            {"rule": "self.hosts.exists(h, h.startsWith('a'))"},
            {"rule": "'app' in self.labels && self.labels['app'] == 'db'"},
            {"rule": "string(size(self.hosts)) == '2'"},
            {"rule": "self.name.lowerAscii() == self.name"}]}));
    admits(
        &adm,
        &mut resource(json!({"name": "mongodb", "hosts": ["a:27017", "b:27017"],
                                       "labels": {"app": "db"}})),
        None,
    );
    refuses_with(
        &adm,
        resource(json!({"name": "mongodb", "hosts": ["a:27017", "b:1"],
                                       "labels": {"app": "db"}})),
        None,
        &["spec: Invalid value: \"object\": failed rule: self.hosts.all(h, h.endsWith(':27017'))"],
    );
}

#[test]
fn property_names_that_are_not_cel_identifiers_are_escaped() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "rs-name": {"type": "string"}, "namespace": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.rs__dash__name == self.__namespace__"}]}));
    admits(
        &adm,
        &mut resource(json!({"rs-name": "a", "namespace": "a"})),
        None,
    );
}

#[test]
fn rules_on_items_and_map_values_report_indexed_and_keyed_paths() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "hosts": {"type": "array", "items": {"type": "string",
            "x-kubernetes-validations": rule("self.contains(':')", "host:port")}},
        "labels": {"type": "object", "additionalProperties": {"type": "string",
            "x-kubernetes-validations": rule("self != ''", "not empty")}}}}));
    refuses_with(
        &adm,
        resource(json!({"hosts": ["a:1", "b"], "labels": {"x": ""}})),
        None,
        &[
            "spec.hosts[1]: Invalid value: \"string\": host:port",
            "spec.labels[x]: Invalid value: \"string\": not empty",
        ],
    );
}

#[test]
fn a_runtime_error_is_reported_as_an_evaluation_failure() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"tls": {"type": "object",
        "properties": {"enabled": {"type": "boolean"}}}},
        "x-kubernetes-validations": [{"rule": "self.tls.enabled"}]}),
    );
    refuses_with(&adm, resource(json!({"tls": {}})), None, &[
        "spec: Invalid value: \"object\": no such key: enabled evaluating rule: self.tls.enabled",
    ]);
}

#[test]
fn blocking_schema_errors_keep_cel_rules_from_running() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer"}},
        "x-kubernetes-validations": rule("self.members > 0", "positive")}),
    );
    refuses_with(&adm, resource(json!({"members": "x"})), None, &[
        "spec.members: Invalid value: \"string\": spec.members in body must be of type integer: \"string\"",
        "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
    ]);
}

#[test]
fn non_blocking_schema_errors_let_cel_rules_run() {
    let adm = with_spec(
        json!({"type": "object", "properties": {"members": {"type": "integer", "minimum": 0}},
        "x-kubernetes-validations": rule("self.members > 0", "positive")}),
    );
    refuses_with(&adm, resource(json!({"members": -1})), None, &[
        "spec.members: Invalid value: -1: spec.members in body should be greater than or equal to 0",
        "spec: Invalid value: \"object\": positive",
    ]);
}

#[test]
fn unchanged_values_ratchet_non_transition_rules_on_update() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "name": {"type": "string", "x-kubernetes-validations": rule("self.size() <= 3", "short")},
        "members": {"type": "integer"}}}));
    let old = resource(json!({"name": "toolong", "members": 1}));
    admits(
        &adm,
        &mut resource(json!({"name": "toolong", "members": 2})),
        Some(&old),
    );
    refuses_with(
        &adm,
        resource(json!({"name": "stilltoolong"})),
        Some(&old),
        &["spec.name: Invalid value: \"string\": short"],
    );
}

#[test]
fn transition_rules_follow_map_list_items_by_key() {
    let adm = with_spec(json!({"type": "object", "properties": {
        "members": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["host"],
            "items": {"type": "object", "properties": {"host": {"type": "string"}, "id": {"type": "integer",
                "x-kubernetes-validations": rule("self == oldSelf", "id is immutable")}}}}}}));
    let old = resource(json!({"members": [{"host": "a", "id": 0}, {"host": "b", "id": 1}]}));
    admits(
        &adm,
        &mut resource(
            json!({"members": [{"host": "b", "id": 1}, {"host": "a", "id": 0}, {"host": "c", "id": 9}]}),
        ),
        Some(&old),
    );
    refuses_with(
        &adm,
        resource(json!({"members": [{"host": "b", "id": 2}]})),
        Some(&old),
        &["spec.members[0].id: Invalid value: \"integer\": id is immutable"],
    );
}
