//! The guard abstraction: a typed Rust function plus its options.
//!
//! An application turns a function into a [`Guard`] with [`guard`]; the input
//! type's doc comment becomes the description and both schemas come from the
//! types, so nothing is written twice. The registry owns the finished guards;
//! only the executor ever calls `Guard::invoke`.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use crate::error::GuardError;

/// Where a guard's code runs. The default is [`Mode::Isolated`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
// Exhaustive on purpose: every layer that serves a notice or runs a
// call must handle a new variant, so adding one is a breaking change.
pub enum Mode {
    /// A fresh worker process per call: killable at its deadline, limited by
    /// rlimits, unable to hurt the server. Costs a process spawn (~2 ms).
    Isolated,
    /// A thread of the server process; may borrow managed [`Resources`].
    /// Cannot be killed at its deadline (see `warden_calls::limits::DEFAULT_MAX_OVERDUE_IN_PROCESS`).
    InProcess,
    /// A computation with no I/O and no resources. Called directly it runs
    /// like `in_process`; inside a script worker it runs inline, with no round
    /// trip to the server.
    Pure,
}

impl Mode {
    /// The snake_case name used in tool metadata, events and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Isolated => "isolated",
            Mode::InProcess => "in_process",
            Mode::Pure => "pure",
        }
    }
}

/// The category of a guard that did not set one with [`Guard::category`].
pub const DEFAULT_CATEGORY: &str = "general";

/// Whether a guard's calls run as MCP tasks ([`Guard::task_support`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Always a plain call (the default).
    #[default]
    Forbidden,
    /// A task when the client asks for one; a plain call otherwise.
    Optional,
    /// Always a task: a client without the Tasks extension is refused.
    Required,
}

/// MCP tool annotations. Guards check or compute, so the defaults are
/// read-only, idempotent, not destructive and closed-world; a guard that
/// writes or reaches outside must say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl Default for Hints {
    fn default() -> Self {
        Self {
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }
    }
}

/// Managed resources (a loaded file, a pool) built from factories in the
/// server process only, shared by `in_process` guards, dropped at shutdown.
#[derive(Default, Clone)]
pub struct Resources {
    by_type: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    /// Factories that failed at startup: type name and reason, quoted to
    /// guards that ask for them.
    failed: HashMap<TypeId, (&'static str, String)>,
}

impl Resources {
    pub fn insert(&mut self, id: TypeId, value: Arc<dyn Any + Send + Sync>) {
        self.by_type.insert(id, value);
    }

    pub fn insert_failure(&mut self, id: TypeId, name: &'static str, reason: String) {
        self.failed.insert(id, (name, reason));
    }

    /// The factories that failed at startup: each resource's type name and
    /// the reason, sorted by name.
    pub fn failures(&self) -> Vec<(&'static str, &str)> {
        let mut failed: Vec<(&'static str, &str)> = self
            .failed
            .values()
            .map(|(name, reason)| (*name, reason.as_str()))
            .collect();
        failed.sort_unstable();
        failed
    }

    /// The resource of type `T`, or an error naming the type when the app
    /// never registered it.
    pub fn get<T: Any + Send + Sync>(&self) -> Result<&T, GuardError> {
        self.by_type
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
            .ok_or_else(|| {
                if let Some((name, reason)) = self.failed.get(&TypeId::of::<T>()) {
                    return GuardError::new(
                        crate::error::codes::RESOURCE_UNAVAILABLE,
                        format!("managed resource {name} failed to load at startup: {reason}"),
                    );
                }
                GuardError::new(
                    crate::error::codes::RESOURCE_MISSING,
                    format!(
                        "managed resource {} is not available in this process; register it with App::resource and run the guard in_process",
                        std::any::type_name::<T>()
                    ),
                )
            })
    }
}

/// A function usable as a guard: `Fn(Input) -> Result<Output, E>` or
/// `Fn(&Resources, Input) -> Result<Output, E>`. The `Marker` parameter only
/// tells the two shapes apart (the pattern axum uses for handlers).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be used as a guard",
    label = "not a guard function",
    note = "a guard is `fn(Input) -> Result<Output, E>` or `fn(&Resources, Input) -> Result<Output, E>`, where Input: Deserialize + JsonSchema, Output: Serialize + JsonSchema, and E: Into<GuardError>"
)]
pub trait GuardFn<I, O, Marker>: Send + Sync + 'static {
    /// Whether the function borrows managed resources (and so must run
    /// in the server process).
    const USES_RESOURCES: bool;
    fn invoke(&self, resources: &Resources, input: I) -> Result<O, GuardError>;
}

/// Marker for `Fn(Input)`.
pub struct Plain<E>(std::marker::PhantomData<E>);
/// Marker for `Fn(&Resources, Input)`.
pub struct WithResources<E>(std::marker::PhantomData<E>);

impl<F, I, O, E> GuardFn<I, O, Plain<E>> for F
where
    F: Fn(I) -> Result<O, E> + Send + Sync + 'static,
    E: Into<GuardError>,
{
    const USES_RESOURCES: bool = false;
    fn invoke(&self, _: &Resources, input: I) -> Result<O, GuardError> {
        self(input).map_err(Into::into)
    }
}

impl<F, I, O, E> GuardFn<I, O, WithResources<E>> for F
where
    F: Fn(&Resources, I) -> Result<O, E> + Send + Sync + 'static,
    E: Into<GuardError>,
{
    const USES_RESOURCES: bool = true;
    fn invoke(&self, resources: &Resources, input: I) -> Result<O, GuardError> {
        self(resources, input).map_err(Into::into)
    }
}

/// The type-erased call: JSON arguments in, JSON result out.
pub type ErasedFn = Arc<dyn Fn(&Resources, Value) -> Result<Value, GuardError> + Send + Sync>;

/// The same call for inline use in scripts: Rhai values in and out, with
/// no JSON in between (a pure guard in a loop pays only for itself).
pub type ScriptFn = Arc<dyn Fn(&Resources, rhai::Dynamic) -> Result<rhai::Dynamic, GuardError> + Send + Sync>;

/// A guard's schemas, generated on first use. Workers re-execute the app's
/// `main` and build every guard, but only ever need the output shape of the
/// one they run, so generating all schemas eagerly would cost every worker
/// a few milliseconds.
pub struct LazySchemas {
    input: OnceLock<(Map<String, Value>, String)>,
    output: OnceLock<(Map<String, Value>, bool)>,
    make_input: fn() -> (Map<String, Value>, String),
    make_output: fn() -> (Map<String, Value>, bool),
}

impl LazySchemas {
    fn input(&self) -> &(Map<String, Value>, String) {
        self.input.get_or_init(self.make_input)
    }
    fn output(&self) -> &(Map<String, Value>, bool) {
        self.output.get_or_init(self.make_output)
    }
}

/// One registered guard. Build it with [`guard`], then chain its options
/// (each one sets one thing, in any order) and register it with
/// `App::guard` (in the `warden` facade).
#[derive(Clone)]
#[must_use = "a guard does nothing until it is registered with App::guard"]
pub struct Guard {
    pub name: String,
    /// A human-readable title clients may show instead of the name.
    pub title: Option<String>,
    pub schemas: Arc<LazySchemas>,
    pub mode: Mode,
    /// Catalogue group shown by `list_guards` (default [`DEFAULT_CATEGORY`]).
    pub category: String,
    pub timeout: Option<Duration>,
    pub hints: Hints,
    pub uses_resources: bool,
    /// The output type is `Vec<Content>`: the call answers with those MCP
    /// content blocks (text, images, audio, embedded resources) instead of
    /// structuredContent, and the tool declares no output schema. Decided
    /// by the type, like `uses_resources`, so it cannot disagree with it.
    pub content_output: bool,
    /// Left out of the coding agent's system prompt
    /// ([`Guard::hidden_from_model`]); still an MCP tool and a script
    /// function.
    pub hidden_from_model: bool,
    /// The guard's own version for receipts ([`Guard::version`]); the
    /// app's version stands for it when unset.
    pub version: Option<String>,
    /// Whether a call may (or must) run as an MCP task
    /// ([`Guard::task_support`]).
    pub task_support: TaskSupport,
    /// Its questions before `warden::ask::detach` are asked in the request
    /// ([`Guard::asks_before_task`]).
    pub asks_before_task: bool,
    pub run: ErasedFn,
    pub run_inline: ScriptFn,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.name)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// The Rhai-native erased call. Arguments decode straight from the script's
/// map; when that fails (or a value needs JSON's looser number rules) the
/// JSON decoder runs instead, so errors name the field exactly as for MCP.
fn inline_fn<F, I, O, M>(function: Arc<F>, shapes: Arc<LazySchemas>) -> ScriptFn
where
    F: GuardFn<I, O, M>,
    I: DeserializeOwned + JsonSchema + 'static,
    O: Serialize + JsonSchema + 'static,
{
    Arc::new(move |resources, arguments: rhai::Dynamic| {
        let input: I = match rhai::serde::from_dynamic::<I>(&arguments) {
            Ok(input) => input,
            Err(_) => {
                let json = rhai::serde::from_dynamic::<Value>(&arguments).map_err(|e| {
                    GuardError::new(
                        crate::error::codes::INVALID_ARGUMENTS,
                        format!("invalid arguments: not representable as JSON: {e}"),
                    )
                })?;
                crate::schema::decode_arguments(json)?
            }
        };
        let output = function.invoke(resources, input)?;
        let value = rhai::serde::to_dynamic(&output).map_err(|e| {
            GuardError::new(
                crate::error::codes::BAD_OUTPUT,
                format!("guard result is not representable in a script: {e}"),
            )
        })?;
        Ok(if shapes.output().1 {
            let mut map = rhai::Map::new();
            map.insert("result".into(), value);
            map.into()
        } else {
            value
        })
    })
}

/// Turns a typed function into a guard. The tool name defaults to the
/// function's own name (`fn price_option` → `price_option`); rename it with
/// [`Guard::name`]. The description is the input type's doc comment, and
/// the input and output types are the tool's schemas. An output type of
/// `Vec<`[`crate::Content`]`>` answers with those MCP content blocks
/// (an image, audio, an embedded document) instead of structured JSON, and
/// the tool then declares no output schema.
///
/// ```
/// # use warden_core as warden; // the `warden` facade re-exports these
/// use warden::{GuardError, Mode, guard};
/// use warden::schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// /// Checks that a volatility is usable.
/// #[derive(Deserialize, JsonSchema)]
/// struct VolInput {
///     /// Annualised volatility, e.g. 0.2.
///     volatility: f64,
/// }
///
/// #[derive(Serialize, JsonSchema)]
/// struct Verdict {
///     ok: bool,
/// }
///
/// fn check_volatility(input: VolInput) -> Result<Verdict, GuardError> {
///     Ok(Verdict { ok: input.volatility > 0.0 })
/// }
///
/// let guard = guard(check_volatility).pure().category("checks");
/// assert_eq!(guard.tool_name(), "check_volatility");
/// assert_eq!(guard.description(), "Checks that a volatility is usable.");
/// assert_eq!(guard.mode(), Mode::Pure);
/// assert!(guard.input_schema()["properties"].get("volatility").is_some());
/// ```
pub fn guard<F, I, O, M>(function: F) -> Guard
where
    F: GuardFn<I, O, M>,
    I: DeserializeOwned + JsonSchema + 'static,
    O: Serialize + JsonSchema + 'static,
{
    let schemas = Arc::new(LazySchemas {
        input: OnceLock::new(),
        output: OnceLock::new(),
        make_input: crate::schema::input_schema::<I>,
        make_output: crate::schema::output_schema::<O>,
    });
    let function = Arc::new(function);
    let run_inline = inline_fn::<F, I, O, M>(function.clone(), schemas.clone());
    let shapes = schemas.clone();
    let run: ErasedFn = Arc::new(move |resources, arguments| {
        let input: I = crate::schema::decode_arguments(arguments)?;
        let output = function.invoke(resources, input)?;
        // Every mode ends here (workers run this same closure), so no
        // non-finite number leaves any guard as a silent `null`.
        let (schema, wraps_scalar) = shapes.output();
        let value = crate::schema::output_value(&output, schema, *wraps_scalar)?;
        Ok(if *wraps_scalar {
            serde_json::json!({ "result": value })
        } else {
            value
        })
    });
    Guard {
        name: crate::schema::function_name::<F>(),
        title: None,
        schemas,
        mode: if F::USES_RESOURCES {
            Mode::InProcess
        } else {
            Mode::Isolated
        },
        category: DEFAULT_CATEGORY.to_string(),
        timeout: None,
        hints: Hints::default(),
        uses_resources: F::USES_RESOURCES,
        content_output: TypeId::of::<O>() == TypeId::of::<Vec<crate::Content>>(),
        hidden_from_model: false,
        task_support: TaskSupport::Forbidden,
        asks_before_task: false,
        version: None,
        run,
        run_inline,
    }
}

impl Guard {
    /// Sets the tool name (an alias for the function name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// Sets a human-readable title clients may show instead of the tool
    /// name, e.g. "Price a European option".
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    /// Runs in a fresh worker process per call (the default).
    pub fn isolated(mut self) -> Self {
        self.mode = Mode::Isolated;
        self
    }
    /// Runs on a server thread; required for guards that borrow resources.
    pub fn in_process(mut self) -> Self {
        self.mode = Mode::InProcess;
        self
    }
    /// Marks a computation with no I/O: runs inline inside script workers.
    pub fn pure(mut self) -> Self {
        self.mode = Mode::Pure;
        self
    }
    /// Sets the catalogue category `list_guards` groups it under, e.g.
    /// "costs" (default "general").
    pub fn category(mut self, category: impl Into<String>) -> Self {
        self.category = category.into();
        self
    }
    /// Sets the guard's timeout (clamped to the server maximum).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Sets all four MCP annotations at once.
    pub fn hints(mut self, hints: Hints) -> Self {
        self.hints = hints;
        self
    }
    /// Declares that the guard changes something outside itself.
    pub fn destructive(mut self) -> Self {
        self.hints.read_only = false;
        self.hints.destructive = true;
        self.hints.idempotent = false;
        self
    }
    /// Declares that calling the guard again with the same arguments
    /// changes nothing more (MCP `idempotentHint`), e.g. an order keyed by
    /// a client order id. Call it after [`Guard::destructive`], which
    /// clears it. A replay (`replay_task`) runs a destructive guard again
    /// with its recorded approval only when it is idempotent.
    pub fn idempotent(mut self) -> Self {
        self.hints.idempotent = true;
        self
    }
    /// Declares that the guard talks to systems outside the server.
    pub fn open_world(mut self) -> Self {
        self.hints.open_world = true;
        self
    }
    /// Keeps the guard out of the coding agent's system prompt: for guards
    /// that exist for operators or comparisons (a second path to the same
    /// answer), whose listing would cost every task prompt bytes and tempt
    /// the model to use them. The guard stays an MCP tool, is listed by
    /// `list_guards`, and scripts (and `map_call`) can still call it.
    pub fn hidden_from_model(mut self) -> Self {
        self.hidden_from_model = true;
        self
    }

    /// Lets calls of the guard run as MCP tasks (the Tasks extension,
    /// SEP-2663): for long work a client should poll rather than wait on.
    /// A call from a client that declared the extension and asked for a
    /// task (or, on 2026-07-28, declared it in the request) is answered at
    /// once with a task handle; the call runs on whichever server claims
    /// it, `tasks/get` shows it working, then the very result a plain call
    /// returns. Its questions (`warden::ask`) wait in the task's record
    /// (`input_required`) for `tasks/update`, and the guard then runs
    /// again from the start with every answer so far, so it must be safe
    /// to re-run up to its questions, as on a stateless request.
    /// [`TaskSupport::Required`] refuses clients without the extension
    /// (-32021) instead of running the call while they wait.
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// For a guard with task support that gathers input, then works long:
    /// on a stateless (2026-07-28) request its call runs in the request
    /// until it reaches `warden::ask::detach`, its questions asked through
    /// multi-round-trip input as for a plain call; the request that
    /// reaches `detach` is answered with the task's handle, and the task
    /// runs the guard again with those answers (SEP-2663's multi-round-trip
    /// to task composition). Elsewhere the task starts before the guard
    /// runs and its questions wait in the task.
    pub fn asks_before_task(mut self) -> Self {
        self.asks_before_task = true;
        self
    }

    /// Sets the guard's own version, which its call receipts carry beside
    /// the app's (see [`crate::receipt`]): bump it when the guard's
    /// results change, so an old receipt says which implementation made it.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    pub fn tool_name(&self) -> &str {
        &self.name
    }
    /// The version set with [`Guard::version`], if any.
    pub fn guard_version(&self) -> Option<&str> {
        self.version.as_deref()
    }
    pub fn description(&self) -> &str {
        &self.schemas.input().1
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    /// Whether the coding agent's prompt leaves this guard out
    /// ([`Guard::hidden_from_model`]).
    pub fn is_hidden_from_model(&self) -> bool {
        self.hidden_from_model
    }
    pub fn input_schema(&self) -> &Map<String, Value> {
        &self.schemas.input().0
    }
    pub fn output_schema(&self) -> &Map<String, Value> {
        &self.schemas.output().0
    }

    /// Decodes, runs and encodes one call in the current thread. Only the
    /// executor and the worker entry point call this.
    pub fn invoke(&self, resources: &Resources, arguments: Value) -> Result<Value, GuardError> {
        (self.run)(resources, arguments)
    }

    /// [`Guard::invoke`] on Rhai values, for pure guards run inline in a
    /// script worker.
    pub fn invoke_inline(
        &self,
        resources: &Resources,
        arguments: rhai::Dynamic,
    ) -> Result<rhai::Dynamic, GuardError> {
        (self.run_inline)(resources, arguments)
    }
}
