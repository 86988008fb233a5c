//! A detached task that waits for the person (MCP Tasks `input_required`):
//! its question on `tasks/get`, its answer through `tasks/update`.
//!
//! When a detached `run_script` task reaches a destructive call (or a plan)
//! with no answer, its run stops and its record waits, holding no server
//! and no slot, with what resumes it under its request's `resume` key (see
//! `warden_core::approval`). `tasks/get` then answers `input_required`
//! with one `inputRequests` entry: an `elicitation/create` form keyed by
//! the question's key (`plan` or `call-N`). `tasks/update` with
//! `inputResponses` for exactly that key answers it, from any node and
//! also after the node that ran the task restarted: the answer is recorded
//! (who, what, when) and the task is queued again; whichever node claims
//! it resumes the script through its journal. A response for any other
//! key, one that is not a form's answer, or one for a task that does not
//! wait is refused (-32602) and changes nothing; of two answers to the
//! same question the first wins.
//!
//! A guard task (`server/guard_task.rs`) waits with every question its
//! guard asked (`Carried::asked`) and is answered in part or whole: each
//! answer to an open question moves into `Carried::responses`, keys of no
//! open question are ignored (as on a stateless retry), and the task is
//! queued again once none is open.

use rmcp::ErrorData;
use rmcp::model::{ElicitRequest, InputRequest, InputRequests, InputResponses};
use serde_json::{Value, json};
use warden_core::approval::{Carried, Pending};

use warden_core::ask::Elicitation;
use warden_task::store::{State, TaskRecord};

/// What a waiting task's record keeps: its resumption, and since when it
/// waits; `None` when it does not wait (any more).
pub(crate) async fn carried(
    records: &warden_task::records::Records,
    record: &TaskRecord,
) -> Result<Option<(Value, Carried, i64)>, ErrorData> {
    if record.state != State::Waiting {
        return Ok(None);
    }
    let Some((request, since)) = records
        .waiting(&record.id)
        .await
        .map_err(crate::tasks::store_error)?
    else {
        return Ok(None);
    };
    let carried = request
        .get("resume")
        .cloned()
        .and_then(|resume| serde_json::from_value::<Carried>(resume).ok())
        .unwrap_or_default();
    Ok(Some((request, carried, since)))
}

/// The `inputRequests` of a waiting task: a guard task's open questions,
/// or a script's one question as a form.
pub(crate) fn input_requests(carried: &Carried) -> Option<InputRequests> {
    if !carried.asked.is_empty() {
        let open = carried
            .asked
            .iter()
            .filter_map(|(key, request)| Some((key.clone(), serde_json::from_value(request.clone()).ok()?)));
        return Some(open.collect());
    }
    carried.pending.as_ref().map(form_request)
}

/// An approval's question as a form.
pub(crate) fn form_request(pending: &Pending) -> InputRequests {
    let mut requests = InputRequests::new();
    if let Ok(params) =
        crate::asking::elicit_params(pending.message.clone(), pending.requested_schema.clone())
    {
        requests.insert(
            pending.key.clone(),
            InputRequest::Elicitation(ElicitRequest::new(params)),
        );
    }
    requests
}

/// Answers the waiting `record` with `responses`, as `principal` (its
/// owner): records the answer and queues the task again.
pub(crate) async fn answer(
    records: &warden_task::records::Records,
    record: &TaskRecord,
    principal: &str,
    responses: &InputResponses,
    question: Option<&str>,
) -> Result<(), ErrorData> {
    let refuse = |message: String| {
        Err(ErrorData::invalid_params(
            message,
            Some(json!({"task_id": record.id})),
        ))
    };
    let Some((_, mut carried, since)) = carried(records, record).await? else {
        return refuse(format!(
            "task '{}' is {}, not waiting for input: there is no question to answer, and nothing changed",
            record.id,
            record.state.as_str()
        ));
    };
    if !carried.asked.is_empty() {
        return answer_guard(records, record, carried, since, responses).await;
    }
    let Some(pending) = carried.pending.take() else {
        return refuse(format!(
            "task '{}' waits with no question; nothing changed",
            record.id
        ));
    };
    // A stateless retry's sealed state names the question it was issued
    // for: a state kept from an earlier round answers nothing later.
    if let Some(question) = question.filter(|key| *key != pending.key) {
        return refuse(format!(
            "this requestState was issued for question '{question}', and task '{}' now waits on '{}'; retry with the requestState of the answer that asked it",
            record.id, pending.key
        ));
    }
    let form = form_answer(&pending, responses)?;
    let at = warden_task::store::iso8601(warden_task::store::now_ms());
    carried
        .answers
        .push(pending.answered(principal, form.action, form.content, at));
    let resume =
        serde_json::to_value(&carried).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let queued = records
        .answer(&record.id, since, &resume, true)
        .await
        .map_err(crate::tasks::store_error)?;
    if !queued {
        return refuse(format!(
            "task '{}' no longer waits on '{}' (it was answered or cancelled meanwhile); nothing changed",
            record.id, pending.key
        ));
    }
    Ok(())
}

/// Answers some or all of a waiting guard task's open questions: each
/// response to an open question is checked against its kind and kept;
/// keys of no open question are ignored (SEP-2322: a client may send more
/// than was asked). Once none is open the task is queued to run again with
/// every answer; until then it keeps waiting on the rest.
async fn answer_guard(
    records: &warden_task::records::Records,
    record: &TaskRecord,
    mut carried: Carried,
    since: i64,
    responses: &InputResponses,
) -> Result<(), ErrorData> {
    let mut answered = 0;
    for (key, response) in responses {
        let Some(request) = carried.asked.get(key) else {
            continue;
        };
        crate::rounds::check_response(request, response).map_err(|why| {
            ErrorData::invalid_params(
                format!("inputResponses.{key}: {why}; nothing changed"),
                Some(json!({"task_id": record.id})),
            )
        })?;
        carried.asked.remove(key);
        carried.responses.insert(key.clone(), response.clone());
        answered += 1;
    }
    if answered == 0 {
        return Ok(());
    }
    let queue = carried.asked.is_empty();
    let resume =
        serde_json::to_value(&carried).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let taken = records
        .answer(&record.id, since, &resume, queue)
        .await
        .map_err(crate::tasks::store_error)?;
    if !taken {
        return Err(ErrorData::invalid_params(
            format!(
                "task '{}' changed while you answered (answered, cancelled or resumed meanwhile); read it with tasks/get and answer again",
                record.id
            ),
            Some(json!({"task_id": record.id})),
        ));
    }
    Ok(())
}

/// The form's answer `responses` give to `pending`: only its key, and a
/// form's answer; anything else is refused (-32602) naming the fix.
pub(crate) fn form_answer(pending: &Pending, responses: &InputResponses) -> Result<Elicitation, ErrorData> {
    let refuse = |message: String| Err(ErrorData::invalid_params(message, None));
    if let Some(other) = responses.keys().find(|key| **key != pending.key) {
        return refuse(format!(
            "inputResponses names '{other}', which is not an outstanding question: answer '{}' only; nothing changed",
            pending.key
        ));
    }
    let Some(response) = responses.get(&pending.key) else {
        return refuse(format!(
            "inputResponses has no answer to '{}', the outstanding question; nothing changed",
            pending.key
        ));
    };
    serde_json::from_value(response.clone()).map_err(|e| {
        ErrorData::invalid_params(
            format!(
                "inputResponses.{} must be a form's answer {{\"action\": \"accept\"|\"decline\"|\"cancel\", \"content\": {{\"confirm\": true|false}}}}: {e}; nothing changed",
                pending.key
            ),
            None,
        )
    })
}
