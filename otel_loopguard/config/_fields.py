"""The table of settings: name, type, default, allowed range and documentation."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from otel_loopguard.exceptions import ConfigError
from otel_loopguard.signature import DEFAULT_VOLATILE_KEYS

TOOL_KINDS: Final = ("read", "mutating", "poll", "exempt", "default")
_SHELL_TOOLS: Final = ("bash", "sh", "zsh", "shell", "terminal", "cmd", "command", "exec",
                       "exec_command",
                       "execute_bash", "execute_command", "local_shell", "run_bash",
                       "run_command", "run_in_terminal", "run_shell_command", "run_terminal_cmd",
                       "run_terminal_command", "shell_command", "command_execution",
                       "container.exec")
_EDITOR_TOOLS: Final = ("str_replace_editor", "str_replace_based_edit_tool", "text_editor",
                        "edit", "multiedit", "write", "read", "view", "view_file", "edit_file",
                        "write_file", "write_to_file", "create_file", "replace_in_file",
                        "search_replace", "apply_patch",
                        # OpenHands SDK; GitHub Copilot; Cursor; Roo Code and Kilo Code; Windsurf;
                        # browser-use
                        "file_editor", "replace_string_in_file", "multi_replace_string_in_file",
                        "insert_edit_into_file", "edit_notebook_file", "edit_notebook",
                        "apply_diff", "insert_content", "search_and_replace",
                        "replace_file_content", "multi_replace_file_content",
                        "replace_file_str")
_DETECTORS: Final = ("stagnation", "repeat", "cycle", "failure", "mutating_failure", "reread",
                     "batch", "handoff", "near_duplicate", "budget", "idle_turns")


MAX_SECONDS: Final = 365 * 24 * 3600
"""The longest duration any seconds setting or flag takes: one year. No deployment needs a run,
a request or a wait longer, and a larger number (``1e10``) overflows a socket timeout or a
nanosecond count later, where the error would name nothing."""


@dataclass(frozen=True, slots=True)
class FieldRule:
    """How one setting is typed, bounded and documented."""

    kind: str
    """``int``, ``float``, ``bool``, ``str``, ``choice``, ``list`` or ``table`` (key → choice)."""
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    """True when None (off) is allowed."""
    paired: bool = False
    """A list whose entries pair by position with another list's, so one may appear twice."""

    def allowed(self) -> str:
        """Return the allowed values in words, for error messages and docs."""
        if self.kind == "choice":
            return f"one of {self.choices}"
        if self.kind in ("int", "float"):
            top = "" if self.maximum is None else f" and <= {self.maximum:.15g}"
            off = ' (or "off")' if self.optional else ""
            return f"a number >= {self.minimum:g}{top}{off}" if self.kind == "float" else (
                f"an integer >= {self.minimum:g}{top}{off}")
        if self.kind == "list":
            return "a list of strings (comma-separated in env vars)"
        if self.kind == "table":
            return (f"a table of command -> kind, each kind one of {self.choices} "
                    "(key=kind pairs, comma-separated, in env vars)")
        return f"a {self.kind}"

    def check(self, name: str, value: Any) -> Any:
        """Return ``value`` converted and validated.

        Raises:
            ConfigError: naming ``name`` and the allowed range.
        """
        if self.optional and (value is None or _is_off(self.kind, value)):
            return None  # TOML has no null: "off" turns off a limit that is on by default
        bad = ConfigError(f"{name} must be {self.allowed()}, got {value!r}")
        if (self.kind == "bool" and not isinstance(value, bool)) or (
                self.kind == "choice" and value not in self.choices):
            raise bad
        if self.kind in ("bool", "choice"):
            return value
        if self.kind == "str":
            if not isinstance(value, str):
                raise bad
            return value
        if self.kind == "table":
            return self._check_table(name, value, bad)
        if self.kind == "list":
            if isinstance(value, str) or not isinstance(value, Sequence) or not all(
                    isinstance(v, str) for v in value):
                raise bad
            if not all(v.strip() for v in value):
                raise ConfigError(f"{name}: an empty name in {list(value)!r}")
            repeated = None if self.paired else next(
                (v for i, v in enumerate(value) if v in value[:i]), None)
            if repeated is not None:
                raise ConfigError(f"{name}: {repeated!r} is listed twice")
            return tuple(value)
        return self._check_number(value, bad)

    def _check_table(self, name: str, value: Any, bad: ConfigError) -> Mapping[str, str]:
        """Return a table with its keys' whitespace folded, or raise naming the bad entry."""
        if not isinstance(value, Mapping):
            raise bad
        table: dict[str, str] = {}
        for key, kind in value.items():
            folded = " ".join(key.split()) if isinstance(key, str) else ""
            if not folded:
                raise ConfigError(f"{name}: every key must be a command (e.g. 'git diff'), "
                                  f"got {key!r}")
            if kind not in self.choices:
                raise ConfigError(f"{name}.{folded} must be one of {self.choices}, got {kind!r}")
            table[folded] = kind
        return MappingProxyType(table)

    def _check_number(self, value: Any, bad: ConfigError) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        if self.kind == "int" and not float(value).is_integer():
            raise bad
        if not math.isfinite(value):  # NaN passes every comparison; inf no bound
            raise bad
        if self.minimum is not None and value < self.minimum:
            raise bad
        if self.maximum is not None and value > self.maximum:
            raise bad
        return int(value) if self.kind == "int" else float(value)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Return `` (did you mean 'x'?)`` for the known name closest to ``name``, else ``""``."""
    import difflib  # only when a name is wrong: not on every start-up

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_off(kind: str, value: Any) -> bool:
    """Return True for ``"off"`` or ``"none"`` given to an optional number (or import path)."""
    return kind in ("int", "float", "str") and isinstance(value, str) and \
        value.strip().lower() in ("off", "none")


def parse_env_value(var: str, rule: FieldRule, raw: str) -> Any:
    """Return the typed value of environment variable ``var``.

    Raises:
        ConfigError: naming the variable and what it accepts.
    """
    text = raw.strip()
    if rule.optional and rule.kind in ("int", "float", "str") and text.lower() in ("none",
                                                                                   "off"):
        return None  # an optional limit (or the embedder's import path): off
    try:
        if rule.kind == "bool":
            lowered = text.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError
            return lowered in ("true", "1", "yes", "on")
        if rule.kind in ("int", "float"):
            return int(text) if rule.kind == "int" else float(text)
        if rule.kind == "list":  # "" is the empty list; "a,b," is (a, b); "," names nothing
            items = tuple(p.strip() for p in text.split(",") if p.strip())
            if text and not items:
                raise ValueError
            return items
    except ValueError:
        raise ConfigError(f"{var} must be {rule.allowed()}, got {raw!r}") from None
    if rule.kind == "table":
        return _env_table(var, rule, raw, text)
    return text


def _env_table(var: str, rule: FieldRule, raw: str, text: str) -> dict[str, str]:
    """Return the ``key=kind`` pairs of a table variable; each key once."""
    pairs = [p.partition("=") for p in text.split(",") if p.strip()]
    if any(not sep for _, sep, _ in pairs):
        raise ConfigError(f"{var} must be {rule.allowed()}, got {raw!r}")
    table: dict[str, str] = {}
    for key, _, kind in pairs:
        if key.strip() in table:
            raise ConfigError(f"{var}: {key.strip()!r} is given twice")
        table[key.strip()] = kind.strip()
    return table


def _int(default: int | None, doc: str, minimum: int = 1, maximum: int | None = None,
         optional: bool = False) -> FieldRule:
    return FieldRule("int", default, doc, minimum, maximum, optional=optional)


MEMORY_TOOLS: Final = ("core_memory_append", "core_memory_replace", "core_memory_add",
                       "core_memory_remove", "archival_memory_insert", "archival_memory_add",
                       "archival_memory_remove", "memory_replace", "memory_insert",
                       "memory_rethink", "memory_append", "write_memory", "edit_memory",
                       "delete_memory")
"""An agent's memory tools that write (Letta and MemGPT's, BFCL's memory API, Serena's): a
successful write is a state change, a rejected one a failing change."""


FIELDS: Final[dict[str, FieldRule]] = {
    # general
    "mode": FieldRule("choice", "observe", "observe: only report; enforce: guards block looping "
                      "calls and stop is sticky for the run", choices=("observe", "enforce")),
    "run_key": FieldRule("choice", "trace", "How tool calls are grouped into runs: trace id, "
                         "conversation/session id, or nearest agent span",
                         choices=("trace", "conversation", "agent")),
    "enforcement": FieldRule("choice", "abort", "What an enforce-mode guard does on stop",
                             choices=("abort", "hint", "hint_then_abort")),
    "hint_on_warn": FieldRule("bool", False, "Enforce mode: also hand the model a hint on warn "
                              "(the tool still runs)"),
    "detectors": FieldRule("list", _DETECTORS, "Detectors that run (all by default)"),
    # windows and thresholds
    "window_size": _int(12, "Recent tool calls that stagnation and repeat look at", 2, 1000),
    "stagnation_warn": _int(3, "Same call, same result: warn at this count", 2),
    "stagnation_replan": _int(4, "Same call, same result: replan at this count", 2),
    "stagnation_stop": _int(5, "Same call, same result: stop at this count", 2),
    "stagnation_no_effect_warn": _int(
        6, "Same call, same result in this many world versions in a row: warn (NO_EFFECT)",
        2, optional=True),
    "repeat_warn": _int(3, "Same call, results not captured: warn at this count", 2),
    "repeat_replan": _int(5, "Same call, results not captured: replan at this count", 2),
    "cycle_max_length": _int(8, "Longest cycle (in steps) the cycle detector looks for", 2, 1000),
    "cycle_warn": _int(2, "Cycle repetitions for warn", 2),
    "cycle_stop": _int(3, "Cycle repetitions for stop", 2),
    "cycle_max_gap": _int(4, "Other calls (turns, for batch) allowed between two repetitions of "
                          "a block or a batch", 0, 100),
    "cycle_gap_warn": _int(3, "Block repeated with other calls between: warn at this many "
                           "occurrences", 2, optional=True),
    "failure_permanent_same_args_stop": _int(
        2, "Permanent failure with identical arguments: stop at this count", 2),
    "failure_permanent_warn": _int(3, "Same permanent error, other arguments, same target: "
                                   "warn", 2),
    "failure_permanent_stop": _int(4, "Same permanent error, other arguments, same target: "
                                   "stop", 2),
    "failure_permanent_any_target_warn": _int(
        5, "Same permanent error on other targets, or the same unclassified error (or a "
        "mutating call's same error) of a tool whose arguments are not captured: warn (never "
        "stops by itself)", 2, optional=True),
    "failure_retryable_warn": _int(3, "Same retryable error, identical arguments: warn at this "
                                   "count", 2),
    "failure_retryable_stop": _int(5, "Same retryable error, identical arguments: stop at this "
                                   "count", 2),
    "mutating_failure_warn": _int(3, "Mutating call failing with the same error on the "
                                  "same target, no success on it between: warn", 2),
    "mutating_failure_stop": _int(4, "Mutating call failing with the same error on the "
                                  "same target, no success on it between: stop", 2),
    "reread_warn": _int(3, "Same read with unchanged content anywhere in the run: warn", 2),
    "batch_warn": _int(3, "Same parallel batch with unchanged results in consecutive turns", 2),
    "handoff_window": _int(16, "Recent handoffs the handoff detector looks at", 4, 1000),
    "handoff_max_cycle": _int(5, "Longest handoff cycle (agents)", 2, 64),
    "handoff_stop": _int(2, "Closed handoff cycles for stop", 2),
    "near_duplicate_window": _int(6, "Recent calls the near-duplicate detector looks at", 3, 100),
    "near_duplicate_min": _int(3, "Near-duplicate calls for replan", 2),
    "near_duplicate_jaccard": FieldRule("float", 0.5, "Token overlap for multi-word text "
                                        "arguments to count as a paraphrase", 0.0, 1.0),
    "near_duplicate_embedder": FieldRule("str", None, "Embedder for multi-word text instead of "
                                         "token overlap, as module:function", optional=True),
    "near_duplicate_similarity": FieldRule("float", 0.8, "Cosine similarity of two embeddings "
                                           "to count as a paraphrase", 0.0, 1.0),
    "poll_warn": _int(5, "Poll tools: unchanged results in a row for warn", 2),
    "poll_stop": _int(10, "Poll tools: unchanged results in a row for stop", 2),
    "max_tool_calls_warn": _int(50, "Tool calls per run: warn", optional=True),
    "max_tool_calls_stop": _int(None, "Tool calls per run: stop the calls past it (off by "
                                "default)", optional=True),
    "max_calls_per_tool_warn": _int(None, "Calls of one tool per run: warn", optional=True),
    "max_calls_per_tool_stop": _int(None, "Calls of one tool per run: stop the calls past it",
                                    optional=True),
    "max_steps_warn": _int(None, "Steps per run (tool calls and model turns): warn",
                           optional=True),
    "max_steps_stop": _int(None, "Steps per run (tool calls and model turns): stop past it",
                           optional=True),
    "max_run_seconds_warn": FieldRule("float", None, "Wall-clock seconds per run: warn", 0.0,
                                      MAX_SECONDS, optional=True),
    "max_run_seconds_stop": FieldRule("float", None, "Wall-clock seconds per run: stop past it",
                                      0.0, MAX_SECONDS, optional=True),
    "idle_turns_warn": _int(4, "Model turns in a row that call no tool, in one agent "
                            "invocation: warn", 2, optional=True),
    # tool kinds
    "mutating_tools": FieldRule("list", ("edit_file", "write_file", "delete_file", "patch",
                                         "apply_patch", "replace", "NotebookEdit", "KillShell",
                                         "save_memory", "create", "insert", "append",
                                         *MEMORY_TOOLS),
                                "Tools that change the world, whatever their arguments (MCP "
                                "names ending in __<name> too)"),
    "read_tools": FieldRule("list", ("read_file", "read_many_files", "Glob",
                                     "list_directory", "glob", "search_file_content",
                                     "grep_search", "list_dir", "grep_files", "view_image"),
                            "Tools whose re-reads the reread detector watches"),
    "poll_tool_patterns": FieldRule("list", ("*status*", "poll*", "wait*", "*progress*",
                                             "check_job*", "get_job*", "bashoutput",
                                             "taskoutput", "write_stdin"),
                                    "Tool-name globs treated as poll tools"),
    "ask_tool_patterns": FieldRule("list", ("ask_followup_question", "attempt_completion",
                                            "askuserquestion", "ask_user*", "ask_human*",
                                            "human", "request_user_input"),
                                   "Tool-name globs of tools that ask the user: a new result of "
                                   "one is the user's reply, a new message from the user"),
    "shell_tools": FieldRule("list", _SHELL_TOOLS, "Tools whose calls are shell commands, "
                             "classified per call by the command (names in lower case)"),
    "editor_tools": FieldRule("list", _EDITOR_TOOLS, "Editor tools, classified per call by "
                              "their subcommand (view reads; create, str_replace... change)"),
    "command_kinds": FieldRule("table", None, "Entries added to the built-in command table, "
                               "e.g. terraform apply=mutating (they win over built-in ones)",
                               choices=TOOL_KINDS, optional=True),
    "command_word_tools": FieldRule("bool", True, "Read a tool named like a known command "
                                    "(cat, sed, git...) as a shell call of that command"),
    "volatile_keys": FieldRule("list", DEFAULT_VOLATILE_KEYS,
                               "Result keys ignored when comparing results (globs)"),
    "max_value_chars": _int(4096, "Strings longer than this are hashed in signatures", 64),
    # runs and memory
    "max_runs": _int(10_000, "Open runs kept in memory (least recently used evicted)", 1),
    "run_ttl_seconds": FieldRule("float", 3600.0, "Idle seconds before a run is dropped", 1.0,
                                 MAX_SECONDS),
    # prompt templates and conversations
    "prompt_name_keys": FieldRule("list", ("gen_ai.prompt.name", "langfuse.observation.prompt.name",
                                           "traceloop.prompt.key", "metadata.prompt_name",
                                           "llm.prompt_template.template",
                                           "metadata.prompt_template", "loopguard.template"),
                                  "Attributes (or paths inside a JSON attribute, "
                                  "metadata.prompt_name) that name the prompt template, in "
                                  "order"),
    "prompt_version_keys": FieldRule("list", ("gen_ai.prompt.version",
                                              "langfuse.observation.prompt.version",
                                              "traceloop.prompt.version",
                                              "metadata.prompt_version",
                                              "llm.prompt_template.version",
                                              "metadata.prompt_version",
                                              "loopguard.template_version"),
                                     "Attributes (or paths) that carry its version, in order "
                                     "(paired by position with prompt_name_keys when both "
                                     "lists are as long)", paired=True),
    "conversation_keys": FieldRule("list", ("gen_ai.conversation.id", "session.id",
                                            "traceloop.association.properties.session_id"),
                                   "Attributes that identify a conversation "
                                   "(run_key = conversation)"),
    # metrics
    "max_prompt_templates": _int(200, "Distinct prompt_template label values before 'other'", 1),
    "max_tools": _int(200, "Distinct tool label values before 'other'", 1),
    "max_services": _int(200, "Distinct service_name label values (serve) before 'other'", 1),
    "metrics_addr": FieldRule("str", "127.0.0.1", "Address of the /metrics server"),
    "metrics_port": _int(None, "Port of the /metrics server that install() and "
                         "opentelemetry-instrument start (off unless set)", 0, 65535,
                         optional=True),
    "metrics_exporter": FieldRule("choice", "prometheus", "Where the processor's metrics go: "
                                  "prometheus (a registry, /metrics), otlp (the OpenTelemetry "
                                  "metrics API) or both",
                                  choices=("prometheus", "otlp", "both")),
    # evidence
    "evidence": FieldRule("choice", "spans", "Where the processor writes a finding: spans "
                          "(loopguard.* attributes or a span event), logs (an OpenTelemetry "
                          "log event loopguard.loop_detected) or both",
                          choices=("spans", "logs", "both")),
}

TOOL_THRESHOLDS: Final = frozenset(
    name for name, rule in FIELDS.items()
    if rule.kind in ("int", "float") and name not in (
        "max_runs", "run_ttl_seconds", "max_prompt_templates", "max_tools", "max_services",
        "metrics_port",
        "max_value_chars", "handoff_window", "handoff_max_cycle", "max_tool_calls_warn",
        "max_tool_calls_stop", "max_steps_warn", "max_steps_stop", "max_run_seconds_warn",
        "max_run_seconds_stop", "idle_turns_warn",
        "cycle_max_length", "cycle_max_gap", "window_size", "near_duplicate_window",
        "near_duplicate_similarity"))
"""Thresholds that may be overridden per tool."""

TEMPLATE_THRESHOLDS: Final = frozenset({
    "max_tool_calls_warn", "max_tool_calls_stop", "max_calls_per_tool_warn",
    "max_calls_per_tool_stop", "max_steps_warn", "max_steps_stop", "max_run_seconds_warn",
    "max_run_seconds_stop"})
"""Budgets that may be set per prompt template (``[loopguard.templates."name"]``)."""

BUDGET_LADDERS: Final = tuple((f"{name}_warn", f"{name}_stop") for name in (
    "max_tool_calls", "max_calls_per_tool", "max_steps", "max_run_seconds"))
"""Budget (warn, stop) pairs: a template's table must keep each warn <= its stop."""
