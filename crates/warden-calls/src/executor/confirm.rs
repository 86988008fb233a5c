//! Confirmation before a side effect, enforced where guards run.
//!
//! A guard annotated `destructive` runs only with a [`Consent`] the
//! executor accepts: the person's own direct call ([`Consent::Direct`]:
//! an MCP `tools/call` of that guard, or the operator's CLI `call`), an
//! [`Approval`] of that exact call ([`Consent::Confirmed`]: a form naming
//! the guard, every argument and their SHA-256, answered yes), or the
//! operator's standing permission for batches ([`Consent::Operator`],
//! `App::allow_destructive_in_batch`). Every other path — `verify_receipt`,
//! `check_backtest`, replay, a detached task — carries [`Consent::None`],
//! and the executor refuses the call whatever the path forgot to check:
//! the rule lives in one place, so a new path cannot bypass it.
//!
//! An [`Approval`] can only be made here, by the person's answer, and is
//! bound to the guard and the canonical arguments it was given for: the
//! executor refuses it for any other call. The form always shows every
//! argument that will be used; when they do not fit
//! [`CONFIRMED_ARGUMENTS_MAX_BYTES`] the form is not sent and the call is
//! refused, naming the limit, so a padded early argument can never push
//! the one that matters out of sight. Every answer is recorded as a
//! `destructive_call_confirmed` event (`approved`, the answer's `action`,
//! `arguments_sha256`).

use serde_json::{Value, json};

use crate::events::recovered::Approved;
use crate::events::{Events, Origin};
use crate::limits::CONFIRMED_ARGUMENTS_MAX_BYTES;
use warden_core::approval::{ApprovalRecord, Book, Decision, Pending, confirm_schema};
use warden_core::ask::Question;
use warden_core::error::{GuardError, codes};
use warden_core::guard::Guard;
use warden_core::reach::Reach;

/// Why a call of a destructive guard may run; see the module docs. Calls
/// of other guards need none and carry [`Consent::None`].
#[derive(Debug, Clone, Default)]
pub enum Consent {
    /// Nobody consented: a destructive guard is refused.
    #[default]
    None,
    /// The person's own client called this guard as a tool (a direct MCP
    /// call, the CLI's `call`): the request itself is the deliberate act,
    /// and the client's host is the one that asks (the tool carries
    /// `destructiveHint`).
    Direct,
    /// The person confirmed this exact call through a form.
    Confirmed(Approval),
    /// The operator allowed destructive guards in `run_batch` without
    /// asking (`App::allow_destructive_in_batch`).
    Operator,
}

/// The person's yes to one call: the guard and the SHA-256 of the
/// canonical arguments the form showed. Made only by
/// [`destructive_call`]; the executor accepts it for that call alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    guard: String,
    arguments_sha256: String,
    /// Who answered, how and when, when the answer was kept (a script's,
    /// a batch's, a plan's): what the call's side effect names on its
    /// task's ledger (`crate::events::ledger`).
    answer: Option<Approved>,
}

impl Approval {
    /// Who answered, how and when, when that was kept.
    pub(crate) fn answer(&self) -> Option<&Approved> {
        self.answer.as_ref()
    }
}

/// The answer as a side effect's record names it.
fn approved(record: &ApprovalRecord) -> Approved {
    Approved {
        key: record.key.clone(),
        principal: record.principal.clone(),
        action: serde_json::to_value(record.action)
            .ok()
            .and_then(|action| action.as_str().map(str::to_string))
            .unwrap_or_default(),
        at: record.at.clone(),
    }
}

/// `Ok` when `guard` may run with `arguments` under `consent`. Called by
/// the executor for every call, whatever the path.
pub(crate) fn admits(guard: &Guard, arguments: &Value, consent: &Consent) -> Result<(), GuardError> {
    if !guard.hints.destructive {
        return Ok(());
    }
    let name = &guard.name;
    match consent {
        Consent::Direct | Consent::Operator => Ok(()),
        Consent::Confirmed(approval)
            if approval.guard == *name
                && approval.arguments_sha256 == warden_core::receipt::digest(arguments) =>
        {
            Ok(())
        }
        Consent::Confirmed(_) => Err(GuardError::new(
            codes::FORBIDDEN,
            format!(
                "'{name}' is annotated destructive and the person's approval was for another call (different guard or arguments); it did not run"
            ),
        )),
        Consent::None => Err(GuardError::new(
            codes::FORBIDDEN,
            format!(
                "'{name}' is annotated destructive: it runs only as the person's own direct call or once the person confirms it, and this path cannot ask; call it directly instead"
            ),
        )),
    }
}

/// The [`Consent`] for calling `guard` with `arguments` from a script,
/// a coding task or a batch: [`Consent::None`] for a guard that is not
/// destructive; otherwise the person's [`Approval`] through `reach`,
/// asked before `deadline`. Blocks while the person decides (call it off
/// the async runtime's workers). `Err` when nobody can be asked, the
/// arguments are too large to show in full, or the person said no.
pub fn destructive_call(
    guard: &Guard,
    arguments: &Value,
    origin: &Origin,
    events: &Events,
    reach: &Reach,
    deadline: std::time::Instant,
) -> Result<Consent, GuardError> {
    if !guard.hints.destructive {
        return Ok(Consent::None);
    }
    let name = &guard.name;
    if let Reach::Nobody(why) = reach {
        return Err(nobody_can_answer(name, why));
    }
    let arguments_sha256 = warden_core::receipt::digest(arguments);
    let shown = shown_arguments(arguments);
    if shown.len() > CONFIRMED_ARGUMENTS_MAX_BYTES {
        events.emit(
            origin,
            "destructive_call_confirmed",
            json!({"function": name, "approved": false, "action": "not_asked_too_large",
                   "arguments_sha256": arguments_sha256}),
        );
        return Err(GuardError::new(
            codes::FORBIDDEN,
            format!(
                "the destructive call '{name}' was not run: its arguments are {} bytes as shown, above the {CONFIRMED_ARGUMENTS_MAX_BYTES}-byte limit of a confirmation form (CONFIRMED_ARGUMENTS_MAX_BYTES), and the person must see every argument they approve; pass smaller arguments (e.g. a reference to an artifact instead of its content)",
                shown.len()
            ),
        ));
    }
    let message = form_message(name, &shown, &arguments_sha256, origin);
    let requested_schema = confirm_schema(&format!("Run {name}"));
    let asker = match reach {
        Reach::Asker(asker) => asker,
        // A guard the run's approved plan covers is not asked again.
        Reach::Recorded { book, .. } if book.planned(name) => {
            return from_book(
                book,
                guard,
                arguments_sha256,
                message,
                requested_schema,
                origin,
                events,
            );
        }
        Reach::Recorded { asker, .. } => asker,
        Reach::Durable(book) => {
            return from_book(
                book,
                guard,
                arguments_sha256,
                message,
                requested_schema,
                origin,
                events,
            );
        }
        Reach::Nobody(why) => return Err(nobody_can_answer(name, why)),
    };
    let question = Question::Elicit {
        message: message.clone(),
        requested_schema: requested_schema.clone(),
    };
    let answer = asker(question, Some(deadline));
    let (approved, action) = match &answer {
        Ok(answer) => (
            answer["action"] == "accept" && answer["content"]["confirm"] == true,
            answer["action"].clone(),
        ),
        Err(error) => (false, json!(error.code)),
    };
    // A script run keeps the answer for its receipt.
    let record = match (reach, &answer) {
        (Reach::Recorded { book, .. }, Ok(given)) => Some(record_live_answer(
            book,
            name,
            &arguments_sha256,
            (message, requested_schema),
            given,
            origin,
        )),
        _ => None,
    };
    events.emit(
        origin,
        "destructive_call_confirmed",
        json!({"function": name, "approved": approved, "action": action,
               "arguments_sha256": arguments_sha256, "approval": record}),
    );
    settle(
        name,
        answer,
        approved,
        arguments_sha256,
        record.as_ref().map(self::approved),
    )
}

/// The form's text: who wants to run what, with every argument shown and
/// their digest (what an approval record proves).
fn form_message(name: &str, shown: &str, arguments_sha256: &str, origin: &Origin) -> String {
    format!(
        "A {} wants to call '{name}', which is annotated destructive (it changes something outside Warden), with exactly these arguments (every one of them):\n{}arguments_sha256: {arguments_sha256}\nRun it?",
        if origin.mode == "coding_agent" {
            "coding task"
        } else {
            "script"
        },
        warden_core::approval::fenced(shown)
    )
}

/// The person's answer as the call's consent: confirmed, or a `forbidden`
/// error saying why the call did not run.
fn settle(
    name: &str,
    answer: Result<Value, GuardError>,
    approved: bool,
    arguments_sha256: String,
    kept: Option<Approved>,
) -> Result<Consent, GuardError> {
    match answer {
        Ok(_) if approved => Ok(Consent::Confirmed(Approval {
            guard: name.to_string(),
            arguments_sha256,
            answer: kept,
        })),
        Ok(_) => Err(GuardError::new(
            codes::FORBIDDEN,
            format!("the person did not confirm the destructive call '{name}'; it did not run"),
        )),
        Err(error) => Err(GuardError::new(
            codes::FORBIDDEN,
            format!(
                "the destructive call '{name}' could not be confirmed, so it did not run: {}",
                error.message
            ),
        )),
    }
}

/// A live answer a script run keeps in its `book` for its receipt: the
/// form as asked (`message`, schema) and the person's answer.
fn record_live_answer(
    book: &Book,
    name: &str,
    arguments_sha256: &str,
    (message, requested_schema): (String, Value),
    given: &Value,
    origin: &Origin,
) -> ApprovalRecord {
    let pending = Pending {
        key: book.next_live_key(),
        message,
        requested_schema,
        guard: name.to_string(),
        arguments_sha256: Some(arguments_sha256.to_string()),
        plan: Vec::new(),
        script_sha256: book.script_sha256(),
    };
    let form: warden_core::ask::Elicitation =
        serde_json::from_value(given.clone()).unwrap_or(warden_core::ask::Elicitation {
            action: warden_core::ask::Action::Cancel,
            content: Default::default(),
        });
    let record = pending.answered(
        origin.principal.as_str(),
        form.action,
        form.content,
        now_iso8601(),
    );
    book.record(record.clone());
    record
}

/// Now, as an approval record dates its answer.
pub fn now_iso8601() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The refusal of a destructive call nobody can confirm, saying why.
fn nobody_can_answer(name: &str, why: &str) -> GuardError {
    GuardError::new(
        codes::FORBIDDEN,
        format!(
            "'{name}' is annotated destructive: from a script or batch it runs only once the person confirms the call, and nobody can be asked here: {why}; call the guard directly instead, run this from a client that declares elicitation, or run it as an MCP task, which waits for the answer"
        ),
    )
}

/// A detached task's destructive call, decided by its [`Book`]: run under
/// the plan or the person's approval of exactly this call, refused when
/// declined or not what was approved, or (no answer yet) the question
/// is set and the run pauses: `input_required`, which the script door
/// turns into the end of the run (the worker never sees it).
///
/// A replay's book admits a recorded approval again only for an
/// idempotent guard, and only for a call its original task made with the
/// same arguments: a replay never makes a side effect the person did not
/// see happen once.
fn from_book(
    book: &Book,
    guard: &Guard,
    arguments_sha256: String,
    message: String,
    requested_schema: Value,
    origin: &Origin,
    events: &Events,
) -> Result<Consent, GuardError> {
    let name = guard.name.as_str();
    let approval = |answer: Option<&ApprovalRecord>| Approval {
        guard: name.to_string(),
        arguments_sha256: arguments_sha256.clone(),
        answer: answer.map(approved),
    };
    let refuse = |why: String| {
        events.emit(
            origin,
            "destructive_call_confirmed",
            json!({"function": name, "approved": false, "action": "refused",
                   "arguments_sha256": arguments_sha256, "reason": why}),
        );
        Err(GuardError::new(
            codes::FORBIDDEN,
            format!("the destructive call '{name}' did not run: {why}"),
        ))
    };
    if book.replays() && !guard.hints.idempotent {
        return refuse(format!(
            "a replay never runs '{name}' again: it is not idempotent, so running it again would repeat its side effect"
        ));
    }
    let decision = book.decide(name, &arguments_sha256);
    if matches!(decision, Decision::Planned | Decision::Approved(_))
        && book.replays()
        && !book.ran_before(name, &arguments_sha256)
    {
        return refuse(format!(
            "the original task never ran '{name}' with these arguments ({arguments_sha256}), so its recorded approval does not admit the call in a replay"
        ));
    }
    match decision {
        Decision::Planned => {
            let plan = book.plan_answer();
            events.emit(
                origin,
                "destructive_call_confirmed",
                json!({"function": name, "approved": true, "action": "plan",
                       "arguments_sha256": arguments_sha256, "approval": plan}),
            );
            Ok(Consent::Confirmed(approval(plan.as_ref())))
        }
        Decision::Approved(record) => {
            events.emit(
                origin,
                "destructive_call_confirmed",
                json!({"function": name, "approved": true, "action": record.action,
                       "arguments_sha256": arguments_sha256, "approval": record}),
            );
            Ok(Consent::Confirmed(approval(Some(&record))))
        }
        Decision::Declined(why) | Decision::Refused(why) => refuse(why),
        Decision::Ask(key) => {
            events.emit(
                origin,
                "destructive_call_waiting",
                json!({"function": name, "key": key, "arguments_sha256": arguments_sha256}),
            );
            book.ask(Pending {
                key: key.clone(),
                message,
                requested_schema,
                guard: name.to_string(),
                arguments_sha256: Some(arguments_sha256),
                plan: Vec::new(),
                script_sha256: book.script_sha256(),
            });
            Err(GuardError::new(
                codes::INPUT_REQUIRED,
                format!("'{name}' waits for the person's answer to question '{key}'"),
            ))
        }
    }
}

/// [`destructive_call`] from async code: the question waits on a blocking
/// thread, never on a runtime worker. [`Consent::None`] at once for a
/// guard that is not destructive.
pub async fn destructive_call_async(
    guard: &Guard,
    arguments: &Value,
    origin: &Origin,
    events: &Events,
    reach: Reach,
    deadline: std::time::Instant,
) -> Result<Consent, GuardError> {
    if !guard.hints.destructive {
        return Ok(Consent::None);
    }
    let (guard, arguments, origin, events) =
        (guard.clone(), arguments.clone(), origin.clone(), events.clone());
    tokio::task::spawn_blocking(move || {
        destructive_call(&guard, &arguments, &origin, &events, &reach, deadline)
    })
    .await
    .unwrap_or_else(|e| {
        Err(GuardError::failed(format!(
            "the confirmation ended abnormally: {e}"
        )))
    })
}

/// The arguments as the form shows them: one `"key": value` line per
/// argument in canonical key order, values in JSON (so quotes, newlines
/// and control characters are escaped), and every character that does
/// not show on a screen as itself escaped as `\u{…}`
/// ([`warden_core::screen::shown`]) so nothing the guard receives can be
/// hidden from the person.
fn shown_arguments(arguments: &Value) -> String {
    let text = match arguments {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            let mut lines = String::new();
            for key in keys {
                lines.push_str(&Value::from(key.as_str()).to_string());
                lines.push_str(": ");
                lines.push_str(&map[key].to_string());
                lines.push('\n');
            }
            lines
        }
        other => format!("{other}\n"),
    };
    warden_core::screen::shown(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_core::guard::guard;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Wipe {
        #[allow(dead_code)]
        record: String,
    }

    fn wipe(_: Wipe) -> Result<f64, GuardError> {
        Ok(1.0)
    }

    #[test]
    fn a_destructive_guard_needs_consent_for_exactly_its_call() {
        // No consent refuses; an approval admits its own call only; direct calls and other guards pass.
        let destructive = guard(wipe).destructive();
        let plain = guard(wipe);
        let ledger = json!({"record": "ledger"});
        let other = json!({"record": "payroll"});
        let approval = Consent::Confirmed(Approval {
            guard: destructive.name.clone(),
            arguments_sha256: warden_core::receipt::digest(&ledger),
            answer: None,
        });
        let refused = admits(&destructive, &ledger, &Consent::None).expect_err("refused");
        assert_eq!(refused.code, codes::FORBIDDEN);
        assert!(admits(&destructive, &ledger, &approval).is_ok());
        let elsewhere = admits(&destructive, &other, &approval).expect_err("another call");
        assert!(
            elsewhere.message.contains("approval was for another call"),
            "{}",
            elsewhere.message
        );
        assert!(admits(&destructive, &other, &Consent::Direct).is_ok());
        assert!(admits(&plain, &other, &Consent::None).is_ok());
    }

    #[test]
    fn an_answer_the_run_keeps_travels_with_the_approval_it_gives() {
        // A live answer a script run keeps says who let the call run, how and when:
        // what its side effect names on its task's ledger. A bare asker keeps no answer.
        let destructive = guard(wipe).destructive();
        let arguments = json!({"record": "ledger"});
        let origin = Origin::request("script", "run_script");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let yes: warden_core::ask::Asker =
            std::sync::Arc::new(|_, _| Ok(json!({"action": "accept", "content": {"confirm": true}})));
        let book = Book::new(Default::default());
        let live = Reach::Recorded {
            asker: yes.clone(),
            book: book.clone(),
        };
        let given = destructive_call(
            &destructive,
            &arguments,
            &origin,
            &Events::disabled(),
            &live,
            deadline,
        );
        let Ok(Consent::Confirmed(approval)) = given else {
            panic!("approved: {given:?}")
        };
        let answer = approval.answer().expect("the run kept the answer").clone();
        assert_eq!(
            (
                answer.key.as_str(),
                answer.principal.as_str(),
                answer.action.as_str()
            ),
            ("call-1", "local", "accept")
        );
        assert!(!answer.at.is_empty());
        let bare = destructive_call(
            &destructive,
            &arguments,
            &origin,
            &Events::disabled(),
            &Reach::Asker(yes),
            deadline,
        );
        let Ok(Consent::Confirmed(approval)) = bare else {
            panic!("approved: {bare:?}")
        };
        assert!(approval.answer().is_none());
    }

    #[test]
    fn every_argument_is_shown_and_invisible_characters_are_escaped() {
        // The form lists every key on its own line and escapes what a screen would not show.
        let shown =
            shown_arguments(&json!({"record": "led\u{202e}ger", "a": "x\ny", "n": 9007199254740993u64}));
        assert_eq!(
            shown,
            "\"a\": \"x\\ny\"\n\"n\": 9007199254740993\n\"record\": \"led\\u{202e}ger\"\n"
        );
    }
}
