//! `InterpretHealth`: whether a cluster's `MongoDB` is healthy.

use super::*;

#[test]
fn interpret_health_is_true_iff_all_local_members_are_healthy_for_the_current_generation() {
    let health = Interpreter::load(Operation::HealthInterpretation);
    let interpret = |object: Json| health.call_one("InterpretHealth", &[object]);

    assert_eq!(
        interpret(ClusterReport::running("member1").observed_object()),
        json!(true)
    );

    let mut short = ClusterReport::running("member2");
    short.healthy_local = 1;
    assert_eq!(
        interpret(short.observed_object()),
        json!(false),
        "1 of 2 members healthy"
    );

    let mut stale = ClusterReport::running("member1").observed_object();
    stale["metadata"]["generation"] = json!(5);
    assert_eq!(
        interpret(stale),
        json!(false),
        "status describes an older spec"
    );

    let mut no_generation = ClusterReport::running("member3").observed_object();
    no_generation["status"]
        .as_object_mut()
        .expect("status")
        .remove("observedGeneration");
    assert_eq!(
        interpret(no_generation),
        json!(true),
        "counts match and no observedGeneration to compare"
    );

    let mut no_status = ClusterReport::running("member3").observed_object();
    no_status.as_object_mut().expect("object").remove("status");
    assert_eq!(interpret(no_status), json!(false));

    let mut scaled_down = ClusterReport::running("member3").observed_object();
    scaled_down["spec"]["members"] = json!(0);
    scaled_down["status"]["currentInfo"]["members"] = json!(0);
    assert_eq!(
        interpret(scaled_down),
        json!(true),
        "a cluster asked to host no member and hosting none"
    );
}

#[test]
fn interpret_health_is_false_in_error_and_while_paused() {
    let health = Interpreter::load(Operation::HealthInterpretation);
    let interpret = |object: Json| health.call_one("InterpretHealth", &[object]);
    let mut error = ClusterReport::running("member1");
    error.state = "Error";
    assert_eq!(
        interpret(error.observed_object()),
        json!(false),
        "state Error"
    );
    let mut paused = ClusterReport::running("member1");
    paused.state = "Pause";
    assert_eq!(
        interpret(paused.observed_object()),
        json!(false),
        "state Pause"
    );
    let mut pause_asked = ClusterReport::running("member1").observed_object();
    pause_asked["spec"]["pause"] = json!(true);
    assert_eq!(interpret(pause_asked), json!(false), "spec.pause");
}
