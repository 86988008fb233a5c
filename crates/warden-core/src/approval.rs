//! Approvals that wait: what a detached task carries while the person
//! decides, and the record of what exactly they approved.
//!
//! A detached MCP task has no open request through which to ask. When its
//! script reaches a destructive guard call it has no answer for, it
//! *pauses*: the worker ends, and the task's record keeps a [`Carried`]
//! (the [`Journal`](Carried::journal) of every guard call so far, the
//! answers given so far, and the question it stopped on) until the person
//! answers through `tasks/update`. Then the task is queued again, any node
//! claims it, and the script runs from the top with the journal answering
//! every recorded call (see `warden_script::host::journal`); the answered
//! question finds its answer in the [`Book`] and the call runs live, or is
//! refused when declined.
//!
//! Questions are keyed by position, so the same question always gets the
//! same key on every resume: `plan` for a script's plan (asked before it
//! runs, see `warden_script::host::plan`), and `call-N` for the N-th
//! destructive call the plan does not cover. An answer is bound to what it
//! answered: a `call-N` answer admits only the guard and the SHA-256 of the
//! canonical arguments it was given for; a plan admits at most its count
//! of calls of each of its guards, and one more is refused.
//!
//! An [`ApprovalRecord`] holds who answered, what (the guard, the
//! arguments' SHA-256 or the plan, the script's SHA-256, the build) and
//! when; the task's receipt and the `destructive_call_confirmed` events
//! carry them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ask::Action;
use crate::screen::shown;

/// The key of a script's plan question.
pub const PLAN_KEY: &str = "plan";

/// How many calls of one guard a plan covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    pub guard: String,
    /// The most calls the script can make of it, as the scan bounded them.
    pub max_calls: u64,
    /// The argument names of its calls, as the script writes them (values
    /// are computed at run time).
    #[serde(default)]
    pub arguments: Vec<String>,
}

/// The person's answer to one question, and what it was an answer to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// `plan` or `call-N` (see the module docs).
    pub key: String,
    /// Who answered: the task's owner (only its owner can answer).
    pub principal: String,
    /// The guard of a `call-N` question (empty for a plan).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub guard: String,
    /// SHA-256 of the call's canonical arguments (a `call-N` question).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_sha256: Option<String>,
    /// What a plan approves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlanItem>,
    /// SHA-256 of the script that asked.
    pub script_sha256: String,
    /// The build that asked ([`crate::receipt::build_id`]).
    pub build: String,
    pub action: Action,
    /// Whether the answer approves: accepted, and the form's box ticked.
    pub approved: bool,
    /// The form's values as answered.
    #[serde(default)]
    pub content: Map<String, Value>,
    /// When it was answered, ISO 8601 UTC.
    pub at: String,
}

/// A question a paused task waits on: its key and the form to show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub key: String,
    pub message: String,
    pub requested_schema: Value,
    /// The guard it asks about (empty for a plan).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub guard: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlanItem>,
    pub script_sha256: String,
}

impl Pending {
    /// The record of `answer` to this question, by `principal`, at `at`.
    /// Only the form's own fields are kept: whatever else an answer
    /// carries is not what the person was asked, and would only grow the
    /// task's record and receipt.
    pub fn answered(
        &self,
        principal: &str,
        action: Action,
        content: Map<String, Value>,
        at: String,
    ) -> ApprovalRecord {
        let asked = self.requested_schema.get("properties").and_then(Value::as_object);
        let content: Map<String, Value> = content
            .into_iter()
            .filter(|(key, _)| asked.is_some_and(|fields| fields.contains_key(key)))
            .collect();
        let approved = action == Action::Accept && content.get("confirm") == Some(&Value::Bool(true));
        ApprovalRecord {
            key: self.key.clone(),
            principal: principal.to_string(),
            guard: self.guard.clone(),
            arguments_sha256: self.arguments_sha256.clone(),
            plan: self.plan.clone(),
            script_sha256: self.script_sha256.clone(),
            build: crate::receipt::build_id().to_string(),
            action,
            approved,
            content,
            at,
        }
    }
}

/// The confirmation form's schema: one box, unticked unless the person
/// ticks it (`{"confirm": true}` approves).
pub fn confirm_schema(title: &str) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "title": title, "default": false}},
        "required": ["confirm"]
    })
}

/// A plan as the person reads it: one line per guard.
pub fn describe(plan: &[PlanItem]) -> String {
    plan.iter()
        .map(|item| {
            let arguments = if item.arguments.is_empty() {
                String::new()
            } else {
                let names: Vec<String> = item.arguments.iter().map(|name| inert(name)).collect();
                format!(" with arguments {}", names.join(", "))
            };
            let times = match item.max_calls {
                1 => "once".to_string(),
                n => format!("at most {n} times"),
            };
            format!("- '{}' {times}{arguments}\n", item.guard)
        })
        .collect()
}

/// `source` (a script's text, a batch's calls as listed) as a plan's form
/// shows it ([`shown`]), or `None` when that is larger than
/// [`MAX_PLAN_SOURCE_BYTES`](crate::limits::MAX_PLAN_SOURCE_BYTES): such a
/// source gets no plan.
pub fn plan_source(source: &str) -> Option<String> {
    let shown = shown(source);
    (shown.len() <= crate::limits::MAX_PLAN_SOURCE_BYTES).then_some(shown)
}

/// An argument name as a form's text shows it outside a code block: as
/// written when it is a plain name, else quoted with every character that
/// is not a letter, digit or `_` escaped (`"\u{3c}!--"`), so a key the
/// script made up cannot be read as markup.
fn inert(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') && shown(name) == name {
        return name.to_string();
    }
    let escaped: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() && shown(c.encode_utf8(&mut [0; 4])).len() == c.len_utf8() {
                c.to_string()
            } else {
                format!("\\u{{{:x}}}", c as u32)
            }
        })
        .collect();
    format!("\"{escaped}\"")
}

/// The plan's question (key [`PLAN_KEY`]) of a `what` ("script", "batch")
/// whose source hashes to `source_sha256`; `shown_source` is that source
/// as [`plan_source`] shows it. A plan admits calls by count, their
/// arguments computed as the source runs, so the form shows the source
/// itself, every line: what the person approves is that program.
pub fn plan_question(plan: &[PlanItem], source_sha256: &str, what: &str, shown_source: &str) -> Pending {
    let listing = match what {
        "batch" => {
            "its destructive calls and every call whose output they use, in order (a `$result` reference is the output of the call it names)"
        }
        _ => "the whole script, exactly as it will run",
    };
    Pending {
        key: PLAN_KEY.to_string(),
        message: format!(
            "A {what} wants to make these destructive calls (they change something outside Warden), each with \
             arguments it computes as it runs:\n{}\nHere is {listing}:\n{}Approve the plan? It allows these calls \
             and no more ({what} {source_sha256}).",
            describe(plan),
            fenced(shown_source),
        ),
        requested_schema: confirm_schema("Approve the plan"),
        guard: String::new(),
        arguments_sha256: None,
        plan: plan.to_vec(),
        script_sha256: source_sha256.to_string(),
    }
}

/// `text` in a fenced code block whose fence is longer than any run of
/// backticks inside it. Forms are plain text, but many clients draw them
/// as Markdown: there, outside a code block, an HTML comment (`<!--` in one
/// value, `-->` in a later one) or a fence inside the text would hide the
/// lines between from the person. Inside a fence nothing is markup, and
/// nothing in the text can close it.
pub fn fenced(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    format!("{fence}\n{text}{newline}{fence}\n")
}

/// What a paused task carries to its resumption, kept in its record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Carried {
    /// The guard calls of the run so far, in order (entries of
    /// `warden_script::host::journal`, opaque here).
    #[serde(default)]
    pub journal: Vec<Value>,
    /// Every answer so far, in the order given.
    #[serde(default)]
    pub answers: Vec<ApprovalRecord>,
    /// The question the task waits on, if it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
    /// A guard task's answers so far, by question key (`warden::ask`'s
    /// keys): the guard runs again from the start with them.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub responses: Map<String, Value>,
    /// A guard task's questions still open, by key, as the client gets
    /// them (`inputRequests` entries, opaque here); answered keys leave.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub asked: Map<String, Value>,
}

/// What the book says of one destructive call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The plan covers it (its count is spent by one).
    Planned,
    /// The person approved exactly this call.
    Approved(ApprovalRecord),
    /// The person declined this call, or the plan that covers its guard.
    Declined(String),
    /// One more call than the approved plan allows, or an answer given for
    /// another call at this position: refused.
    Refused(String),
    /// Nobody answered yet: the run pauses on this question's key.
    Ask(String),
}

/// The approvals of one run of a detached task (held behind an `Arc` by
/// [`crate::reach::Reach::Durable`]): the answers it carries, the plan's
/// counts left, how many destructive calls it has reached, and the
/// question it stopped on.
#[derive(Debug)]
pub struct Book {
    inner: Mutex<Inner>,
    /// Whether a call with no answer may stop the run on a question;
    /// `false` for a replay.
    can_ask: bool,
    /// Whether this is a replay's book (see [`Book::replays`]).
    replay: bool,
    /// What a task that was not queued (a stateless request's run) runs
    /// when it resumes: the request a queued task's record already holds
    /// (`{tool, arguments, …}`), kept with its question.
    request: Option<Value>,
}

#[derive(Debug)]
struct Inner {
    carried: Carried,
    script_sha256: String,
    /// Calls of each planned guard the run may still make.
    plan_left: BTreeMap<String, u64>,
    /// Whether the person declined the plan.
    plan_declined: bool,
    /// Destructive calls outside the plan reached so far.
    calls: u64,
    /// A replay's: the destructive calls its original task ran, not yet
    /// matched (see [`Book::replaying`]).
    ran: Vec<(String, String)>,
}

impl Book {
    pub fn new(carried: Carried) -> Arc<Self> {
        Arc::new(Self::with(carried, true))
    }

    /// The book of a replay (`replay_task`): the recorded `answers` admit
    /// the calls they admitted, each only as often as the original task
    /// made it with the same arguments (`ran`: the guard and arguments'
    /// SHA-256 of each destructive call it ran), and of idempotent guards
    /// only (see [`Book::replays`]); nothing else is asked: a call with no
    /// recorded answer is refused. A plan's answer admits calls by count,
    /// so without `ran` a replay whose script computes other arguments
    /// (a timestamp, a random id) would make new side effects under it.
    pub fn replaying(answers: Vec<ApprovalRecord>, ran: Vec<(String, String)>) -> Arc<Self> {
        let mut book = Self::answered_with(answers);
        book.replay = true;
        book.lock().ran = ran;
        Arc::new(book)
    }

    /// Whether the original task of this replay ran `guard` with
    /// arguments hashing to `arguments_sha256` a call not yet matched;
    /// matches it when so. Always false outside a replay.
    pub fn ran_before(&self, guard: &str, arguments_sha256: &str) -> bool {
        let mut inner = self.lock();
        match inner
            .ran
            .iter()
            .position(|(g, sha)| g == guard && sha == arguments_sha256)
        {
            Some(at) => {
                inner.ran.remove(at);
                true
            }
            None => false,
        }
    }

    fn answered_with(answers: Vec<ApprovalRecord>) -> Self {
        Self::with(
            Carried {
                answers,
                ..Carried::default()
            },
            false,
        )
    }

    fn with(carried: Carried, can_ask: bool) -> Self {
        Self {
            inner: Mutex::new(Inner {
                carried,
                script_sha256: String::new(),
                plan_left: BTreeMap::new(),
                plan_declined: false,
                calls: 0,
                ran: Vec::new(),
            }),
            can_ask,
            replay: false,
            request: None,
        }
    }

    /// The book of a run that was not queued as a task but may pause (a
    /// stateless request's `run_script`): `request` is what its record
    /// keeps to resume it (see [`Book::request`]).
    pub fn for_request(request: Value) -> Arc<Self> {
        let mut book = Self::with(Carried::default(), true);
        book.request = Some(request);
        Arc::new(book)
    }

    /// What the task's record must hold to resume it when it has no
    /// request of its own (see [`Book::for_request`]).
    pub fn request(&self) -> Option<&Value> {
        self.request.as_ref()
    }

    /// The question the run stopped on, if it did.
    pub fn pending(&self) -> Option<Pending> {
        self.lock().carried.pending.clone()
    }

    /// Whether this is a replay's book: a recorded approval then admits a
    /// guard's call again only when the guard is idempotent (running it
    /// again changes nothing more).
    pub fn replays(&self) -> bool {
        self.replay
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a run of the script with SHA-256 `script_sha256` whose scan
    /// found `plan`: `Some(key)` when the plan must be asked before it runs
    /// (no answer to it yet); otherwise the plan's answer (if any) is in
    /// force for the run.
    pub fn start(&self, script_sha256: &str, plan: &[PlanItem]) -> Option<String> {
        let mut inner = self.lock();
        inner.script_sha256 = script_sha256.to_string();
        inner.calls = 0;
        inner.plan_left.clear();
        inner.plan_declined = false;
        if plan.is_empty() {
            return None;
        }
        let answer = inner.carried.answers.iter().find(|a| a.key == PLAN_KEY).cloned();
        match answer {
            Some(answer) if answer.approved && answer.plan == plan => {
                inner.plan_left = plan.iter().map(|p| (p.guard.clone(), p.max_calls)).collect();
                None
            }
            Some(_) => {
                inner.plan_declined = true;
                inner.plan_left = plan.iter().map(|p| (p.guard.clone(), 0)).collect();
                None
            }
            None if self.can_ask => Some(PLAN_KEY.to_string()),
            None => None,
        }
    }

    /// The answer to the plan, if the person gave one.
    pub fn plan_answer(&self) -> Option<ApprovalRecord> {
        self.lock()
            .carried
            .answers
            .iter()
            .find(|a| a.key == PLAN_KEY)
            .cloned()
    }

    /// Whether the run's plan covers `guard` (approved or declined).
    pub fn planned(&self, guard: &str) -> bool {
        self.lock().plan_left.contains_key(guard)
    }

    /// Starts a run whose `plan` the person answered live (`approved` or
    /// not): its guards may be called that many times, or not at all.
    pub fn start_live(&self, script_sha256: &str, plan: &[PlanItem], approved: bool) {
        let mut inner = self.lock();
        inner.script_sha256 = script_sha256.to_string();
        inner.plan_declined = !approved;
        inner.plan_left = plan
            .iter()
            .map(|p| (p.guard.clone(), if approved { p.max_calls } else { 0 }))
            .collect();
    }

    /// The script's SHA-256 for this run.
    pub fn script_sha256(&self) -> String {
        self.lock().script_sha256.clone()
    }

    /// What to do with the next destructive call, of `guard` with
    /// arguments hashing to `arguments_sha256`.
    pub fn decide(&self, guard: &str, arguments_sha256: &str) -> Decision {
        let mut inner = self.lock();
        if let Some(left) = inner.plan_left.get_mut(guard) {
            if *left > 0 {
                *left -= 1;
                return Decision::Planned;
            }
            return Decision::Refused(if inner.plan_declined {
                format!("the person declined the plan that covers '{guard}'")
            } else {
                format!("the approved plan allows no more calls of '{guard}' (its count is spent)")
            });
        }
        inner.calls += 1;
        let key = format!("call-{}", inner.calls);
        match inner.carried.answers.iter().find(|a| a.key == key) {
            Some(answer)
                if answer.guard == guard && answer.arguments_sha256.as_deref() == Some(arguments_sha256) =>
            {
                if answer.approved {
                    Decision::Approved(answer.clone())
                } else {
                    let how = match answer.action {
                        Action::Decline => "declined it",
                        Action::Cancel => "dismissed the form",
                        Action::Accept => "answered the form without confirming",
                    };
                    Decision::Declined(format!(
                        "the person did not approve this call of '{guard}': they {how}"
                    ))
                }
            }
            Some(answer) => Decision::Refused(format!(
                "the answer at this point ({key}) approved '{}' with arguments {}, not this call of '{guard}' with {arguments_sha256}",
                answer.guard,
                answer.arguments_sha256.as_deref().unwrap_or("?")
            )),
            None if self.can_ask => Decision::Ask(key),
            None => Decision::Refused(format!(
                "there is no answer for this call of '{guard}' ({key}) and nobody is asked in a replay"
            )),
        }
    }

    /// A destructive call answered from the journal: it counts against
    /// the plan or takes its `call-N` position, exactly as it did live.
    pub fn replayed(&self, guard: &str) {
        let mut inner = self.lock();
        match inner.plan_left.get_mut(guard) {
            Some(left) => *left = left.saturating_sub(1),
            None => inner.calls += 1,
        }
    }

    /// The key of the next destructive call asked live (`call-N`).
    pub fn next_live_key(&self) -> String {
        let mut inner = self.lock();
        inner.calls += 1;
        format!("call-{}", inner.calls)
    }

    /// Keeps an answer given live (a session's form), for the receipt.
    pub fn record(&self, answer: ApprovalRecord) {
        self.lock().carried.answers.push(answer);
    }

    /// Sets the question the run stops on.
    pub fn ask(&self, pending: Pending) {
        self.lock().carried.pending = Some(pending);
    }

    /// Whether the run stopped on a question.
    pub fn paused(&self) -> bool {
        self.lock().carried.pending.is_some()
    }

    /// The answers carried so far (for the receipt).
    pub fn answers(&self) -> Vec<ApprovalRecord> {
        self.lock().carried.answers.clone()
    }

    /// The journal to replay.
    pub fn journal(&self) -> Vec<Value> {
        self.lock().carried.journal.clone()
    }

    /// What to keep for the resumption: the answers, the question, and the
    /// run's `journal`.
    pub fn carry(&self, journal: Vec<Value>) -> Carried {
        let inner = self.lock();
        Carried {
            journal,
            answers: inner.carried.answers.clone(),
            pending: inner.carried.pending.clone(),
            ..Carried::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(key: &str, guard: &str, sha: &str, approved: bool, plan: Vec<PlanItem>) -> ApprovalRecord {
        ApprovalRecord {
            key: key.into(),
            principal: "alice".into(),
            guard: guard.into(),
            arguments_sha256: (!sha.is_empty()).then(|| sha.into()),
            plan,
            script_sha256: "sha256:s".into(),
            build: "b".into(),
            action: if approved { Action::Accept } else { Action::Decline },
            approved,
            content: Map::new(),
            at: "now".into(),
        }
    }

    #[test]
    fn an_answer_admits_only_the_call_it_answered() {
        // call-1 approved for (order, a): the same call passes, another call at that position is refused, the next asks.
        let book = Book::new(Carried {
            answers: vec![answered("call-1", "order", "sha256:a", true, vec![])],
            ..Carried::default()
        });
        assert_eq!(book.start("sha256:s", &[]), None);
        assert!(matches!(book.decide("order", "sha256:a"), Decision::Approved(_)));
        assert_eq!(book.decide("order", "sha256:b"), Decision::Ask("call-2".into()));
        book.start("sha256:s", &[]);
        assert!(matches!(book.decide("order", "sha256:b"), Decision::Refused(_)));
    }

    #[test]
    fn an_answer_keeps_only_the_fields_its_form_asked() {
        let pending = Pending {
            key: "call-1".into(),
            message: "Run it?".into(),
            requested_schema: confirm_schema("Run"),
            guard: "order".into(),
            arguments_sha256: Some("sha256:a".into()),
            plan: Vec::new(),
            script_sha256: "sha256:s".into(),
        };
        let mut content = Map::new();
        content.insert("confirm".into(), Value::Bool(true));
        content.insert("padding".into(), Value::String("x".repeat(1000)));
        let record = pending.answered("alice", Action::Accept, content, "now".into());
        assert!(record.approved);
        assert_eq!(record.content.keys().collect::<Vec<_>>(), ["confirm"]);
    }

    #[test]
    fn a_plan_allows_its_count_and_not_one_more() {
        let plan = vec![PlanItem {
            guard: "order".into(),
            max_calls: 2,
            arguments: vec![],
        }];
        let book = Book::new(Carried::default());
        assert_eq!(book.start("sha256:s", &plan), Some(PLAN_KEY.into()));
        let book = Book::new(Carried {
            answers: vec![answered(PLAN_KEY, "", "", true, plan.clone())],
            ..Carried::default()
        });
        assert_eq!(book.start("sha256:s", &plan), None);
        assert_eq!(book.decide("order", "x"), Decision::Planned);
        book.replayed("order");
        assert!(matches!(book.decide("order", "y"), Decision::Refused(_)));
        // A declined plan refuses every call of its guards.
        let book = Book::new(Carried {
            answers: vec![answered(PLAN_KEY, "", "", false, plan.clone())],
            ..Carried::default()
        });
        assert_eq!(book.start("sha256:s", &plan), None);
        assert!(matches!(book.decide("order", "x"), Decision::Refused(m) if m.contains("declined")));
    }

    #[test]
    fn a_form_escapes_what_would_draw_fake_lines_or_nothing() {
        // Separators, C1 controls, DEL, format and blank-looking characters are escaped;
        // newlines, tabs and ordinary text (accents, CJK, emoji) are shown as they are.
        let hostile = "a\u{2028}\"record\": \"x\"\u{2029}b\u{85}c\u{7f}d\u{600}e\u{2800}f\u{fffc}g\u{1bca0}h\u{e000}i\rj";
        assert_eq!(
            shown(hostile),
            "a\\u{2028}\"record\": \"x\"\\u{2029}b\\u{85}c\\u{7f}d\\u{600}e\\u{2800}f\\u{fffc}g\\u{1bca0}h\\u{e000}i\\u{d}j"
        );
        let plain = "for s in [\"é\", \"東京\", \"🙂\"] {\n\tplace(s);\n}";
        assert_eq!(shown(plain), plain);
    }

    #[test]
    fn a_plan_shows_its_whole_source_or_there_is_no_plan() {
        // Within the bound the form carries every line; past it, no plan is offered.
        let plan = vec![PlanItem {
            guard: "wipe".into(),
            max_calls: 2,
            arguments: vec!["record".into()],
        }];
        let source = "wipe(#{record: \"a\"});\nwipe(#{record: \"b\"});\n";
        let shown = plan_source(source).expect("fits");
        let question = plan_question(&plan, "sha256:s", "script", &shown);
        assert!(question.message.contains(source), "{}", question.message);
        assert!(
            question.message.contains("'wipe' at most 2 times"),
            "{}",
            question.message
        );
        let limit = crate::limits::MAX_PLAN_SOURCE_BYTES;
        assert!(plan_source(&"x".repeat(limit)).is_some());
        assert!(plan_source(&"x".repeat(limit + 1)).is_none());
        // Escapes count: a source that fits raw but not escaped gets no plan.
        assert!(plan_source(&"\u{200b}".repeat(limit / 3)).is_none());
    }

    #[test]
    fn a_form_cannot_be_made_to_hide_lines_from_a_markdown_renderer() {
        // The fence outgrows any backtick run in the text; odd argument names are quoted and escaped.
        let hostile = "a\n```\n<!--\nhidden();\n-->\n````\nb";
        let block = fenced(hostile);
        assert!(
            block.starts_with("`````\n") && block.ends_with("\n`````\n"),
            "{block}"
        );
        assert_eq!(fenced("x"), "```\nx\n```\n");
        assert_eq!(inert("record"), "record");
        assert_eq!(inert("<!--"), "\"\\u{3c}\\u{21}\\u{2d}\\u{2d}\"");
        let plan = vec![PlanItem {
            guard: "wipe".into(),
            max_calls: 2,
            arguments: vec!["<!--".into(), "record".into()],
        }];
        let question = plan_question(&plan, "sha256:s", "script", hostile);
        assert!(
            !question.message.contains("with arguments <!--"),
            "{}",
            question.message
        );
        assert!(question.message.contains(&block), "{}", question.message);
    }
}
