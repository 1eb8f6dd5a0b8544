//! The VM and its conversions behave as Karmada's: what a script can reach,
//! how values cross into Lua and back, and how numbers come out.

use std::path::Path;

use karmada_lua::mlua;
use karmada_lua::{integral_numbers, Customization, Error, Interpreter, Operation, LOCKED_OUT};
use serde_json::{json, Value as Json};

/// An object as a script receives it: enough of a resource template.
fn object() -> Json {
    json!({
        "apiVersion": "example.io/v1",
        "kind": "Example",
        "metadata": {"name": "demo", "namespace": "db", "labels": {"app": "demo"}},
        "spec": {"members": 3, "selector": {"zone": "z1"}, "list": [1, 2]}
    })
}

fn interpreter(script: &str) -> Interpreter {
    Interpreter::new(script, "test").expect("the script loads")
}

/// Runs `chunk` in the VM and returns the error it raises.
fn raised(interpreter: &Interpreter, chunk: &str) -> String {
    match interpreter.lua().load(chunk).exec() {
        Ok(()) => format!("no error from {chunk}"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn the_vm_is_lua_5_1_and_locks_out_what_karmadas_locks_out() {
    let interpreter = interpreter("");
    let globals = interpreter.lua().globals();
    let version: String = globals.get("_VERSION").expect("_VERSION");
    assert_eq!(version, "Lua 5.1");
    for name in LOCKED_OUT {
        let error = raised(&interpreter, &format!("{name}({{}})"));
        assert!(
            error.contains(&format!(
                "call function {name} is not supported in karmada customized resourceinterpreter."
            )),
            "{name} must raise Karmada's error, got: {error}"
        );
    }
    assert!(raised(&interpreter, "string.dump(print)")
        .contains("string.dump is not supported by Karmada"));
    assert!(raised(&interpreter, "package.loadlib('x', 'y')").contains("loadlib is not supported"));
    let error = raised(&interpreter, "require('io')");
    assert!(
        error.contains("module 'io' not found"),
        "only preloaded modules load: {error}"
    );
    for absent in ["io", "debug", "coroutine", "gcinfo"] {
        assert!(
            globals.get::<mlua::Value>(absent).expect("global").is_nil(),
            "{absent} is not in Karmada's VM"
        );
    }
    let os: mlua::Table = globals.get("os").expect("os");
    let mut names: Vec<String> = os
        .pairs::<String, mlua::Value>()
        .map(|p| p.expect("pair").0)
        .collect();
    names.sort();
    assert_eq!(names, ["date", "time"], "Karmada's safe os library");
    let table: mlua::Table = globals.get("table").expect("table");
    for absent in ["foreach", "foreachi", "setn"] {
        assert!(
            table.get::<mlua::Value>(absent).expect("field").is_nil(),
            "table.{absent} is not in gopher-lua"
        );
    }
}

#[test]
fn whole_numbers_come_back_integers_exactly_where_go_decodes_an_int64() {
    // Go prints a whole float64 below 1e21 as an integer literal; apimachinery
    // makes an int64 of the literals that fit one.
    let largest_below = 9_223_372_036_854_774_784_i64; // 2⁶³ − 1024, the last float64 below 2⁶³
    assert_eq!(
        integral_numbers(json!(largest_below as f64)),
        json!(largest_below)
    );
    assert_eq!(integral_numbers(json!(-(2f64.powi(63)))), json!(i64::MIN));
    assert_eq!(
        integral_numbers(json!(9.2e18)),
        json!(9_200_000_000_000_000_000_i64)
    );
    assert_eq!(
        integral_numbers(json!(9.1e15)),
        json!(9_100_000_000_000_000_i64)
    );
    assert!(
        integral_numbers(json!(2f64.powi(63))).is_f64(),
        "2⁶³ overflows int64"
    );
    assert!(integral_numbers(json!(1e21)).is_f64());
    assert!(integral_numbers(json!(0.5)).is_f64());
    assert_eq!(integral_numbers(json!(-0.0)), json!(0));

    // The same through a script: numbers are floats in Lua and come back as above.
    let revise = interpreter(
        "function ReviseReplica(obj, n)
           obj.spec.members = n
           obj.spec.big = 2^63 - 1024
           obj.spec.past = 2^63
           obj.spec.half = n / 2
           return obj
         end",
    );
    let revised = revise.revise_replica(&object(), 3).expect("revised");
    assert_eq!(revised["spec"]["members"], json!(3));
    assert!(revised["spec"]["members"].is_i64());
    assert_eq!(revised["spec"]["big"], json!(largest_below));
    assert!(revised["spec"]["past"].is_f64());
    assert_eq!(revised["spec"]["half"], json!(1.5));
}

#[test]
fn values_cross_into_lua_as_decode_value_hands_them_over() {
    let reflect = interpreter(
        "function ReflectStatus(obj)
           return { listed = #obj.spec.items, absent = obj.spec.gone == nil, kind = type(obj.spec.n) }
         end",
    );
    let mut object = object();
    object["spec"]["items"] = json!([1, null, 3]);
    object["spec"]["gone"] = Json::Null;
    object["spec"]["n"] = json!(7);
    assert_eq!(
        reflect.reflect_status(&object).expect("reflected"),
        json!({"listed": 2, "absent": true, "kind": "number"}),
        "a null list element is skipped, a null member is absent"
    );
}

#[test]
fn empty_tables_come_back_as_convert_lua_result_into_puts_them() {
    let aggregate = interpreter(
        r#"
        function AggregateStatus(desiredObj, statusItems)
          desiredObj.spec.selector = {}
          desiredObj.status = { state = "Unknown", replset = {}, conditions = {}, currentInfo = { members = 0 } }
          return desiredObj
        end
        "#,
    );
    let aggregated = aggregate
        .aggregate_status(&object(), &json!([]))
        .expect("aggregated");
    assert_eq!(
        aggregated["status"],
        json!({"state": "Unknown", "currentInfo": {"members": 0}}),
        "empty tables are dropped on the way back (no reference object)"
    );
    assert!(aggregated["spec"].get("selector").is_none());

    // ReviseReplica's result is read against the input object: empty lists and
    // objects it had come back as they were.
    let revise = interpreter("function ReviseReplica(obj, n) obj.spec.members = n return obj end");
    let mut object = object();
    object["spec"]["list"] = json!([]);
    object["spec"]["selector"] = json!({});
    let mut expected = object.clone();
    expected["spec"]["members"] = json!(2);
    assert_eq!(
        revise.revise_replica(&object, 2).expect("revised"),
        expected
    );

    // An empty result is {} for a struct and [] for a slice.
    let empty = interpreter(
        "function ReflectStatus(obj) return {} end
         function GetDependencies(obj) return {} end",
    );
    assert_eq!(empty.reflect_status(&object).expect("reflected"), json!({}));
    assert_eq!(
        empty.get_dependencies(&object).expect("dependencies"),
        json!([])
    );
}

#[test]
fn results_karmada_refuses_are_refused_with_its_errors() {
    for (body, error) in [
        (
            "local t = { a = 1 } o.status = { x = t, y = t }",
            "cannot encode recursively nested tables to JSON",
        ),
        ("o.status = { f = print }", "cannot encode function to JSON"),
        (
            "o.status = { 1, a = 2 }",
            "cannot encode mixed or invalid key types",
        ),
        (
            "o.status = { [1] = 1, [3] = 3 }",
            "cannot encode sparse array",
        ),
        ("o.kind = nil", "Object 'Kind' is missing"),
    ] {
        let script = format!("function AggregateStatus(o, items) {body} return o end");
        let result = interpreter(&script).aggregate_status(&object(), &json!([]));
        assert_eq!(
            result.map_err(|e| e.to_string()),
            Err(error.to_string()),
            "{body}"
        );
    }
    let health = interpreter("function InterpretHealth(obj) return 1 end");
    assert_eq!(
        health.interpret_health(&object()),
        Err(Error::NotABool("number"))
    );
    assert_eq!(
        health.run("GetReplicas", &[], 1).map(drop),
        Err(Error::NoFunction("GetReplicas".into()))
    );
    assert!(matches!(
        Interpreter::new("function (", "broken"),
        Err(Error::Load { .. })
    ));
}

#[test]
fn replicas_are_an_int32_and_requirements_a_struct_or_nil() {
    let replicas = interpreter(
        "function GetReplicas(obj)
           return obj.spec.members + 0.7, { nodeClaim = {}, resourceRequest = { cpu = '1' } }
         end",
    );
    assert_eq!(
        replicas.get_replicas(&object()).expect("replicas"),
        (3, json!({"resourceRequest": {"cpu": "1"}}))
    );
    let without = interpreter("function GetReplicas(obj) return 2 end");
    assert_eq!(
        without.get_replicas(&object()).expect("replicas"),
        (2, Json::Null)
    );
}

#[test]
fn a_customization_gives_each_operation_its_script() {
    let text = r#"
apiVersion: config.karmada.io/v1alpha1
kind: ResourceInterpreterCustomization
spec:
  target:
    apiVersion: example.io/v1
    kind: Example
  customizations:
    healthInterpretation:
      luaScript: |
        function InterpretHealth(obj) return obj.spec.members > 0 end
"#;
    let customization =
        Customization::from_yaml(text, Path::new("example.yaml")).expect("a customization");
    assert!(customization.targets("example.io/v1", "Example"));
    assert!(!customization.targets("apps/v1", "Deployment"));
    assert!(customization.script(Operation::ReplicaResource).is_none());
    let health = customization
        .interpreter(Operation::HealthInterpretation)
        .expect("a script")
        .expect("it loads");
    assert_eq!(health.interpret_health(&object()), Ok(true));
    assert!(Customization::from_yaml("kind: ConfigMap\n", Path::new("cm.yaml")).is_err());
}
