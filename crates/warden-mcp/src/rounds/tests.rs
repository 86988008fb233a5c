//! Rounds without a transport: what the guard's asker answers, what the
//! call answers, and every way a retry's state or responses are refused.

use serde_json::json;

use super::*;

fn alice() -> Principal {
    Principal::new("alice").expect("a name")
}

fn binding() -> Binding {
    Binding::new(&alice(), "ask_name", &json!({"question": "Name?"}))
}

const BOTH: CanAnswer = CanAnswer {
    elicit: true,
    url: true,
    sample: true,
    roots: true,
};

const TTL: Duration = Duration::from_secs(60);

fn form(message: &str) -> Question {
    Question::Elicit {
        message: message.into(),
        requested_schema: json!({"type": "object", "properties": {"name": {"type": "string"}}}),
    }
}

fn done() -> rmcp::model::CallToolResult {
    rmcp::model::CallToolResult::structured(json!({"done": true}))
}

/// Runs one round in which the guard asks `questions` in order, stopping
/// at the first it has no answer for; returns the answers it got and the
/// call's answer.
fn run(round: &Arc<Round>, questions: &[Question]) -> (Vec<Value>, Result<CallToolResponse, GuardError>) {
    let asker = round.asker();
    let mut got = Vec::new();
    for question in questions {
        match asker(question.clone(), None) {
            Ok(answer) => got.push(answer),
            Err(_) => break,
        }
    }
    (got, round.finish(done(), TTL))
}

/// The key and state of an input_required answer.
fn asked(response: Result<CallToolResponse, GuardError>) -> (String, String) {
    match response {
        Ok(CallToolResponse::InputRequired(result)) => {
            let requests = result.input_requests.expect("input requests");
            let key = requests.keys().next().expect("one question").clone();
            (key, result.request_state.expect("a state"))
        }
        other => panic!("expected input_required, got {other:?}"),
    }
}

fn responses(key: &str, answer: Value) -> InputResponses {
    std::iter::once((key.to_string(), answer)).collect()
}

fn message(error: ErrorData) -> String {
    error.message.to_string()
}

#[test]
fn a_question_goes_back_with_its_state_and_the_retry_answers_it() {
    let first = Round::begin(binding(), BOTH, None, None).expect("first round");
    let (got, response) = run(&first, &[form("Name?"), form("Age?")]);
    assert!(got.is_empty());
    let (key, state) = asked(response);
    assert_eq!(key, "q1");

    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    let second = Round::begin(
        binding(),
        BOTH,
        Some(&state),
        Some(&responses("q1", answer.clone())),
    )
    .expect("second round");
    let (got, response) = run(&second, &[form("Name?"), form("Age?")]);
    assert_eq!(got, vec![answer.clone()]);
    let (key, state) = asked(response);
    assert_eq!(key, "q2", "the next question of the call");

    let declined = json!({"action": "decline"});
    let third = Round::begin(
        binding(),
        BOTH,
        Some(&state),
        Some(&responses("q2", declined.clone())),
    )
    .expect("third round");
    let (got, response) = run(&third, &[form("Name?"), form("Age?")]);
    assert_eq!(got, vec![answer, declined]);
    assert!(matches!(response, Ok(CallToolResponse::Complete(_))));
}

#[test]
fn a_state_opens_only_for_its_caller_tool_and_arguments() {
    let first = Round::begin(binding(), BOTH, None, None).expect("first round");
    let (_, state) = asked(run(&first, &[form("Name?")]).1);
    let answer = responses("q1", json!({"action": "accept", "content": {}}));
    let bob = Principal::new("bob").expect("a name");
    for other in [
        Binding::new(&bob, "ask_name", &json!({"question": "Name?"})),
        Binding::new(&alice(), "ask_model", &json!({"question": "Name?"})),
        Binding::new(&alice(), "ask_name", &json!({"question": "Other?"})),
    ] {
        let error = Round::begin(other, BOTH, Some(&state), Some(&answer))
            .map(drop)
            .expect_err("refused");
        assert!(message(error).starts_with("requestState: does not verify"));
    }
    let mut tampered = state.clone();
    tampered.pop();
    tampered.push(if state.ends_with('A') { 'B' } else { 'A' });
    let error = Round::begin(binding(), BOTH, Some(&tampered), Some(&answer))
        .map(drop)
        .expect_err("refused");
    assert!(message(error).starts_with("requestState: does not verify"));
    // The same arguments in another key order are the same call.
    let reordered = Binding::new(
        &alice(),
        "ask_name",
        &serde_json::from_str(r#"{"question":"Name?"}"#).expect("json"),
    );
    assert!(Round::begin(reordered, BOTH, Some(&state), Some(&answer)).is_ok());
}

#[test]
fn an_unanswered_question_is_asked_again_and_a_malformed_answer_is_refused() {
    // SEP-2322: a retry that leaves the open question unanswered (no responses, or only keys
    // of no open question) gets it again; an answer of the wrong kind is refused naming it.
    let first = Round::begin(binding(), BOTH, None, None).expect("first round");
    let (_, state) = asked(run(&first, &[form("Name?")]).1);
    for given in [None, Some(responses("q7", json!({"action": "accept"})))] {
        let again = Round::begin(binding(), BOTH, Some(&state), given.as_ref()).expect("re-asked");
        let (key, _) = asked(run(&again, &[form("Name?")]).1);
        assert_eq!(key, "q1");
    }
    let malformed = responses("q1", json!({"action": "maybe"}));
    let error = Round::begin(binding(), BOTH, Some(&state), Some(&malformed))
        .map(drop)
        .expect_err("malformed");
    assert!(message(error).starts_with("inputResponses.q1: not an elicitation result"));
}

#[test]
fn answers_without_a_state_answer_the_questions_under_their_keys() {
    // A client that did not echo the requestState: each question takes the answer under its
    // own key (checked against its kind); extra keys are ignored; an answer that is no result
    // object at all is refused up front, naming its key.
    let mut given = responses("q1", json!({"action": "accept", "content": {"name": "Ada"}}));
    given.insert("extra".into(), json!({"unasked": true}));
    let round = Round::begin(binding(), BOTH, None, Some(&given)).expect("a round");
    let (got, response) = run(&round, &[form("Name?")]);
    assert_eq!(got[0]["content"]["name"], "Ada");
    assert!(matches!(response, Ok(CallToolResponse::Complete(_))));
    let number = responses("q1", json!(42));
    let error = Round::begin(binding(), BOTH, None, Some(&number))
        .map(drop)
        .expect_err("refused");
    assert!(message(error).starts_with("inputResponses.q1: not an answer"));
}

#[test]
fn a_guard_that_asks_something_else_on_the_retry_is_told_so() {
    let first = Round::begin(binding(), BOTH, None, None).expect("first round");
    let (_, state) = asked(run(&first, &[form("Name?")]).1);
    let answer = responses("q1", json!({"action": "accept", "content": {}}));
    let retry = Round::begin(binding(), BOTH, Some(&state), Some(&answer)).expect("retry");
    let error = retry.asker()(form("Shoe size?"), None).expect_err("another question");
    assert_eq!(error.code, codes::CANNOT_ASK);
    assert!(error.message.contains("question 1 differs"), "{}", error.message);
}

#[test]
fn a_client_that_did_not_declare_the_capability_is_not_asked() {
    let round = Round::begin(
        binding(),
        CanAnswer {
            elicit: false,
            url: false,
            sample: true,
            roots: false,
        },
        None,
        None,
    )
    .expect("round");
    let error = round.asker()(form("Name?"), None).expect_err("cannot ask");
    assert_eq!(error.code, codes::CANNOT_ASK);
    assert!(
        error
            .message
            .contains("elicitation capability for forms (`elicitation: {}` or `elicitation.form`) in this request's _meta"),
        "{}",
        error.message
    );
    assert!(matches!(
        round.finish(done(), TTL),
        Ok(CallToolResponse::Complete(_))
    ));
}

#[test]
fn at_most_max_input_questions_are_asked_in_one_call() {
    let questions: Vec<Question> = (0..=MAX_INPUT_QUESTIONS)
        .map(|i| form(&format!("Question {i}?")))
        .collect();
    let mut state: Option<String> = None;
    let mut answers: Option<InputResponses> = None;
    for n in 1..=MAX_INPUT_QUESTIONS {
        let round = Round::begin(binding(), BOTH, state.as_deref(), answers.as_ref()).expect("round");
        let (got, response) = run(&round, &questions);
        assert_eq!(got.len(), n - 1);
        let (key, sealed) = asked(response);
        answers = Some(responses(&key, json!({"action": "accept", "content": {}})));
        state = Some(sealed);
    }
    let last = Round::begin(binding(), BOTH, state.as_deref(), answers.as_ref()).expect("last round");
    let asker = last.asker();
    for question in &questions[..MAX_INPUT_QUESTIONS] {
        asker(question.clone(), None).expect("answered");
    }
    let error = asker(questions[MAX_INPUT_QUESTIONS].clone(), None).expect_err("one too many");
    assert_eq!(error.code, codes::CANNOT_ASK);
    assert!(error.message.contains("MAX_INPUT_QUESTIONS"), "{}", error.message);
}

#[test]
fn a_state_over_max_input_state_bytes_is_neither_issued_nor_accepted() {
    let first = Round::begin(binding(), BOTH, None, None).expect("first round");
    let (_, state) = asked(run(&first, &[form("Name?")]).1);
    let huge = json!({"action": "accept", "content": {"name": "x".repeat(MAX_INPUT_STATE_BYTES)}});
    let second = Round::begin(binding(), BOTH, Some(&state), Some(&responses("q1", huge))).expect("accepted");
    let (_, response) = run(&second, &[form("Name?"), form("Age?")]);
    let error = response.expect_err("the next state is too large");
    assert_eq!(error.code, codes::CANNOT_ASK);
    assert!(
        error.message.contains("MAX_INPUT_STATE_BYTES"),
        "{}",
        error.message
    );

    let long = "A".repeat(MAX_INPUT_STATE_BYTES + 1);
    let error = Round::begin(binding(), BOTH, Some(&long), Some(&responses("q1", json!({}))))
        .map(drop)
        .expect_err("too long");
    assert!(message(error).contains("MAX_INPUT_STATE_BYTES"));
}

#[test]
fn a_state_expires_after_its_lifetime() {
    let first = Round::begin(binding(), BOTH, None, None).expect("first round");
    let asker = first.asker();
    let _ = asker(form("Name?"), None);
    let (_, state) = asked(first.finish(done(), Duration::from_millis(1)));
    std::thread::sleep(Duration::from_millis(20));
    let answer = responses("q1", json!({"action": "accept", "content": {}}));
    let error = Round::begin(binding(), BOTH, Some(&state), Some(&answer))
        .map(drop)
        .expect_err("expired");
    assert!(message(error).starts_with("requestState: expired"));
}

#[test]
fn questions_asked_at_once_go_out_together_under_their_keys_and_come_back_in_order() {
    // A guard asks a form, a completion and the roots at once: one round carries all three
    // under the guard's keys; the retry answers every one, and the guard gets them in order.
    let questions = || {
        vec![
            Question::keyed("user_name", form("Name?")),
            Question::keyed(
                "greeting",
                Question::Sample {
                    params: json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 5}),
                },
            ),
            Question::keyed("client_roots", Question::ListRoots),
        ]
    };
    let first = Round::begin(binding(), BOTH, None, None).expect("first round");
    let asker = first.asker();
    let waiting = asker(Question::All(questions()), None).expect_err("asked");
    assert_eq!(waiting.code, codes::INPUT_REQUIRED);
    let answer = first
        .finish(rmcp::model::CallToolResult::success(vec![]), TTL)
        .expect("sealed");
    let rmcp::model::CallToolResponse::InputRequired(asked) = answer else {
        panic!("input_required")
    };
    let keys: Vec<&String> = asked.input_requests.as_ref().expect("requests").keys().collect();
    assert_eq!(keys, ["client_roots", "greeting", "user_name"]);
    let state = asked.request_state.expect("state");
    let mut given = InputResponses::new();
    given.insert(
        "user_name".into(),
        json!({"action": "accept", "content": {"name": "Ada"}}),
    );
    given.insert(
        "greeting".into(),
        json!({"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m"}),
    );
    // One left unanswered: asked again, the others kept.
    let partial = Round::begin(binding(), BOTH, Some(&state), Some(&given)).expect("re-asked");
    assert!(partial.asker()(Question::All(questions()), None).is_err());
    let again = partial
        .finish(rmcp::model::CallToolResult::success(vec![]), TTL)
        .expect("sealed");
    let rmcp::model::CallToolResponse::InputRequired(again) = again else {
        panic!("input_required")
    };
    let open: Vec<&String> = again.input_requests.as_ref().expect("requests").keys().collect();
    assert_eq!(open, ["client_roots"]);
    given.insert("client_roots".into(), json!({"roots": [{"uri": "file:///r"}]}));
    given.insert("extra".into(), json!(1));
    let retry = Round::begin(binding(), BOTH, Some(&state), Some(&given)).expect("answered");
    let answers = retry.asker()(Question::All(questions()), None).expect("answered");
    assert_eq!(answers[0]["content"]["name"], "Ada");
    assert_eq!(answers[2]["roots"][0]["uri"], "file:///r");
}

#[test]
fn forms_are_declared_by_an_empty_elicitation_or_its_form_mode_never_by_url_alone() {
    // A client naming only URL mode is sent no form (it would refuse one).
    let of = |capabilities: serde_json::Value| {
        let mut meta = RequestMetaObject::default();
        meta.insert(CLIENT_CAPABILITIES_META_KEY.into(), capabilities);
        let can = CanAnswer::of(&meta);
        (can.elicit, can.url)
    };
    assert_eq!(of(json!({"elicitation": {}})), (true, false));
    assert_eq!(of(json!({"elicitation": {"form": {}}})), (true, false));
    assert_eq!(of(json!({"elicitation": {"url": {}}})), (false, true));
    assert_eq!(of(json!({"elicitation": {"form": {}, "url": {}}})), (true, true));
    assert_eq!(of(json!({"elicitation": null})), (false, false));
    assert_eq!(of(json!({})), (false, false));
}
