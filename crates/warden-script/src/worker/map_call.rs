//! `map_call(name, items)`: many calls of one guard for the price of one.
//!
//! A model pricing a vector, or a script sweeping a grid, would otherwise
//! spend one door round trip and one unit of the door budget per point.
//! Here every item is still a full guard call (validation, events,
//! function_calls.json, its own timeout), but the items of a guard that is
//! not pure travel in one [`FromWorker::MapCall`] message and come back in
//! one reply, counting once against the door budget. A pure guard's items
//! run inline, each an inline call. At most [`MAX_MAP_CALL_ITEMS`] items.
//!
//! The result has one entry per item, in order: `#{ok: output}` or
//! `#{error: #{code, message, field}}`, so one bad item never hides the
//! others. Refusals of the whole call (unknown guard, too many items, the
//! door budget spent, a timed-out item) are thrown, catchable.

use std::sync::{Arc, Mutex};

use rhai::{Array, Dynamic, Engine, EvalAltResult, Map, NativeCallContext};
use serde_json::Value;

use super::bindings::{call_pure, thrown, to_json, to_rhai};
use super::door::Door;
use crate::limits::MAX_MAP_CALL_ITEMS;
use crate::protocol::{FromWorker, map_item};
use warden_core::error::{GuardError, codes};
use warden_core::guard::Mode;
use warden_core::registry::Registry;

type RhaiResult = Result<Dynamic, Box<EvalAltResult>>;

/// Registers `map_call(name, items)`.
pub(super) fn register(engine: &mut Engine, registry: Arc<Registry>, door: Arc<Mutex<Door>>) {
    engine.register_fn(
        "map_call",
        move |ctx: NativeCallContext, name: &str, items: Array| -> RhaiResult {
            let position = ctx.call_position();
            map_call(&registry, &door, name, items).map_err(|e| thrown(e, position))
        },
    );
}

fn map_call(
    registry: &Registry,
    door: &Arc<Mutex<Door>>,
    name: &str,
    items: Array,
) -> Result<Dynamic, GuardError> {
    // A guard hidden from the run's caller is as unknown as a name never
    // registered, and is not among the names the error suggests.
    let hidden = door
        .lock()
        .map(|door| door.denied.keys().cloned().collect())
        .unwrap_or_default();
    let visible = registry.visible(hidden);
    let Some(guard) = visible.get(name) else {
        return Err(visible.unknown_guard(name));
    };
    if items.len() > MAX_MAP_CALL_ITEMS {
        return Err(GuardError::invalid_input(
            "items",
            format!(
                "{} items; at most {MAX_MAP_CALL_ITEMS} fit in one map_call: split the list",
                items.len()
            ),
        ));
    }
    if guard.mode() == Mode::Pure {
        let results: Array = items
            .into_iter()
            .enumerate()
            .map(|(index, item)| {
                let outcome = as_arguments(index, &item).and_then(|_| call_pure(guard, door, item));
                item_value(outcome)
            })
            .collect();
        return Ok(results.into());
    }
    // Items that cannot be sent get their error in place; the rest go in
    // one message.
    let mut slots: Vec<Result<(), GuardError>> = Vec::with_capacity(items.len());
    let mut sent = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        match as_arguments(index, item).and_then(|()| to_json(item)) {
            Ok(arguments) => {
                sent.push(arguments);
                slots.push(Ok(()));
            }
            Err(error) => slots.push(Err(error)),
        }
    }
    let replies = if sent.is_empty() {
        Vec::new()
    } else {
        let mut door = door
            .lock()
            .map_err(|_| GuardError::new(codes::DOOR_CLOSED, "worker door lock poisoned"))?;
        door.spend_door_call()?;
        match door.request(&FromWorker::MapCall {
            guard: name.to_string(),
            items: sent,
        })? {
            Value::Array(replies) => replies,
            other => {
                return Err(GuardError::new(
                    codes::DOOR_PROTOCOL,
                    format!("map_call reply is not a list: {other}"),
                ));
            }
        }
    };
    let mut replies = replies.into_iter();
    let mut results = Array::with_capacity(slots.len());
    for slot in slots {
        let value = match slot {
            Ok(()) => replies.next().ok_or_else(|| {
                GuardError::new(
                    codes::DOOR_PROTOCOL,
                    "map_call reply has fewer results than items",
                )
            })?,
            Err(error) => map_item(Err(error)),
        };
        results.push(to_rhai(value, rhai::Position::NONE).map_err(|e| GuardError::failed(e.to_string()))?);
    }
    Ok(results.into())
}

/// An item must be a map of named arguments, like a direct guard call's.
fn as_arguments(index: usize, item: &Dynamic) -> Result<(), GuardError> {
    if item.is_map() {
        return Ok(());
    }
    Err(GuardError::invalid_input(
        format!("items[{index}]"),
        format!(
            "a {}, not a map of named arguments: write #{{name: value, ...}}",
            item.type_name()
        ),
    ))
}

/// `#{ok: output}` or `#{error: #{code, message, field}}`.
fn item_value(outcome: Result<Dynamic, GuardError>) -> Dynamic {
    let mut map = Map::new();
    match outcome {
        Ok(output) => {
            map.insert("ok".into(), output);
        }
        Err(error) => {
            let mut inner = Map::new();
            inner.insert("code".into(), error.code.into());
            inner.insert("message".into(), error.message.into());
            inner.insert(
                "field".into(),
                error.field.map(Dynamic::from).unwrap_or(Dynamic::UNIT),
            );
            map.insert("error".into(), inner.into());
        }
    }
    map.into()
}
