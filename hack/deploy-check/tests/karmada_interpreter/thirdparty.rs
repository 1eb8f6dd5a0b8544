//! The customization in Karmada's third-party layout is the chart's, and its
//! test cases (Karmada's `IndividualTest` format) pass against the chart's
//! scripts.

use super::*;

/// Karmada's third-party layout: `<group>/<version>/<kind>/customizations.yaml`
/// and `testdata/<operation>-test.yaml` (karmada-io/karmada
/// `pkg/resourceinterpreter/default/thirdparty/`).
const THIRDPARTY: &str =
    "charts/mongodb-member-operator-karmada/thirdparty/middleware.fedstate.io/v1alpha1/MongoDB";

#[test]
fn the_thirdparty_customization_is_the_charts() {
    let path = repository_root()
        .join(THIRDPARTY)
        .join("customizations.yaml");
    let thirdparty: Json =
        serde_yaml::from_str(&std::fs::read_to_string(&path).expect("read customizations.yaml"))
            .expect("customizations.yaml is YAML");
    let chart = customization();
    assert_eq!(thirdparty["apiVersion"], chart["apiVersion"]);
    assert_eq!(thirdparty["kind"], chart["kind"]);
    assert_eq!(
        thirdparty["spec"], chart["spec"],
        "{THIRDPARTY}/customizations.yaml has the chart's scripts"
    );
    // TestThirdPartyCustomizationsFile: the directory names the target.
    let mut parts = THIRDPARTY.rsplit('/');
    let (kind, version, group) = (parts.next(), parts.next(), parts.next());
    assert_eq!(thirdparty["spec"]["target"]["kind"].as_str(), kind);
    assert_eq!(
        thirdparty["spec"]["target"]["apiVersion"],
        format!("{}/{}", group.expect("group"), version.expect("version"))
    );
}

/// `deepEqual` of Karmada's thirdparty_test.go, for an `Unstructured`: fields
/// whose expected value is `{{EXCLUDE}}` are left out of both sides.
fn without_excluded(expected: &Json, actual: &Json) -> (Json, Json) {
    fn strip(expected: &Json, actual: &Json) -> (Json, Json) {
        match (expected, actual) {
            (Json::Object(e), Json::Object(a)) => {
                let mut e2 = serde_json::Map::new();
                let mut a2 = a.clone();
                for (key, value) in e {
                    if value == "{{EXCLUDE}}" {
                        a2.remove(key);
                        continue;
                    }
                    match a.get(key) {
                        Some(actual_value) => {
                            let (e3, a3) = strip(value, actual_value);
                            e2.insert(key.clone(), e3);
                            a2.insert(key.clone(), a3);
                        }
                        None => {
                            e2.insert(key.clone(), value.clone());
                        }
                    }
                }
                (Json::Object(e2), Json::Object(a2))
            }
            _ => (expected.clone(), actual.clone()),
        }
    }
    strip(expected, actual)
}

/// `sortDependencies`: by apiVersion, kind, namespace, name.
fn sorted_dependencies(dependencies: &Json) -> Vec<(String, String, String, String)> {
    let field = |d: &Json, f: &str| d[f].as_str().unwrap_or("").to_string();
    let mut list: Vec<_> = dependencies
        .as_array()
        .expect("a list of dependencies")
        .iter()
        .map(|d| {
            (
                field(d, "apiVersion"),
                field(d, "kind"),
                field(d, "namespace"),
                field(d, "name"),
            )
        })
        .collect();
    list.sort();
    list
}

/// One `IndividualTest`'s results, named as Karmada's rules name them
/// (`pkg/util/interpreter/rule.go`).
fn run_thirdparty_case(
    case: &Json,
) -> Result<Vec<(&'static str, Json)>, Box<dyn std::error::Error>> {
    let desired = case.get("desiredObj").filter(|o| !o.is_null());
    let observed = case.get("observedObj").filter(|o| !o.is_null());
    // getObjectOrError: exactly one of them.
    let object = match (desired, observed) {
        (Some(o), None) | (None, Some(o)) => o,
        _ => return Err("exactly one of desiredObj and observedObj".into()),
    };
    let operation = case["operation"].as_str().unwrap_or("");
    let customization = match operation {
        "InterpretReplica" => Operation::ReplicaResource,
        "ReviseReplica" => Operation::ReplicaRevision,
        "InterpretStatus" => Operation::StatusReflection,
        "AggregateStatus" => Operation::StatusAggregation,
        "InterpretHealth" => Operation::HealthInterpretation,
        "InterpretDependency" => Operation::DependencyInterpretation,
        other => return Err(format!("operation {other} is not supported here").into()),
    };
    let vm = vm(customization);
    Ok(match operation {
        "InterpretReplica" => {
            let (replica, requires) = vm.get_replicas(object)?;
            vec![("replica", json!(replica)), ("requires", requires)]
        }
        "ReviseReplica" => {
            let replicas = case["inputReplicas"].as_i64().unwrap_or(0);
            vec![("revised", vm.revise_replica(object, replicas)?)]
        }
        "InterpretStatus" => vec![("status", vm.reflect_status(object)?)],
        "AggregateStatus" => {
            // A missing statusItems is a nil slice: null in Lua's eyes.
            let items = case.get("statusItems").cloned().unwrap_or(Json::Null);
            vec![("aggregatedStatus", vm.aggregate_status(object, &items)?)]
        }
        "InterpretHealth" => vec![("healthy", json!(vm.interpret_health(object)?))],
        _ => vec![("dependencies", vm.get_dependencies(object)?)],
    })
}

#[test]
fn the_thirdparty_testdata_pass_against_the_charts_scripts() {
    let testdata = repository_root().join(THIRDPARTY).join("testdata");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&testdata)
        .expect("read testdata")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    let mut operations = std::collections::BTreeSet::new();
    let mut cases = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a testdata file");
        for document in serde_yaml::Deserializer::from_str(&text) {
            let case: Json = serde::Deserialize::deserialize(document).expect("a YAML test case");
            let name = format!(
                "{}: {}",
                file.display(),
                case["name"].as_str().unwrap_or("")
            );
            let results = run_thirdparty_case(&case).unwrap_or_else(|err| panic!("{name}: {err}"));
            let output = case["output"].as_object().expect("output");
            for key in output.keys() {
                assert!(
                    results.iter().any(|(result, _)| result == key),
                    "{name}: output key {key} is not a result of {}",
                    case["operation"]
                );
            }
            for (result, actual) in results {
                let Some(expected) = output.get(result) else {
                    continue;
                };
                let expected = integral_numbers(expected.clone());
                match result {
                    "revised" | "aggregatedStatus" => {
                        let (expected, actual) = without_excluded(&expected, &actual);
                        assert!(
                            actual == expected,
                            "{name}: {result}\nexpected:\n{}\ngot:\n{}",
                            serde_json::to_string_pretty(&expected).expect("JSON"),
                            serde_json::to_string_pretty(&actual).expect("JSON")
                        );
                    }
                    "dependencies" => assert_eq!(
                        sorted_dependencies(&actual),
                        sorted_dependencies(&expected),
                        "{name}: {result}"
                    ),
                    _ => assert_eq!(actual, expected, "{name}: {result}"),
                }
            }
            operations.insert(case["operation"].as_str().expect("operation").to_string());
            cases += 1;
        }
    }
    assert_eq!(
        operations.into_iter().collect::<Vec<_>>(),
        [
            "AggregateStatus",
            "InterpretDependency",
            "InterpretHealth",
            "InterpretReplica",
            "InterpretStatus",
            "ReviseReplica"
        ],
        "every customized operation has test cases"
    );
    assert!(cases >= 18, "{cases} cases");
}
