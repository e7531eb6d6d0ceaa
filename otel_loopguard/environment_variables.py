"""The ``LOOPGUARD_*`` environment variables, one ``Final`` constant each.

Every setting of :class:`~otel_loopguard.LoopGuardConfig` (``NAME``) can be set with
``LOOPGUARD_<NAME>``, plus ``LOOPGUARD_CONFIG_FILE`` and ``LOOPGUARD_TOOL_KINDS``; these are
read only when :meth:`LoopGuardConfig.from_env` or :meth:`LoopGuardConfig.load` is called, never
at import. Three more are process-wide switches: ``LOOPGUARD_ENABLED`` (read by the
``opentelemetry-instrument`` entry point), ``LOOPGUARD_SERVE_TOKEN`` (by ``serve``) and
``LOOPGUARD_PURE_PYTHON`` (at import, and when the package is built). An environment variable
wins over the TOML file and loses to an explicit argument.

Value formats: integers and floats as written (``3``, ``0.5``); ``off`` or ``none`` turns an
optional limit off; booleans are ``true``/``false`` (also ``1``/``0``, ``yes``/``no``,
``on``/``off``); lists are comma-separated (``read_file,read_many_files``); the command table is
``command=kind`` pairs, comma-separated (``terraform apply=mutating``). An empty variable
counts as unset. A malformed value raises ``ConfigError`` at start-up; it is never silently
defaulted. A ``LOOPGUARD_*`` variable that is none of these is ignored; one close to one of
these (a typo) is logged once as a warning. ``docs/configuration.md`` has the same list as a
table, checked by ``tests/test_environment_variables.py``.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "LOOPGUARD_ASK_TOOL_PATTERNS",
    "LOOPGUARD_BATCH_WARN",
    "LOOPGUARD_COMMAND_KINDS",
    "LOOPGUARD_COMMAND_WORD_TOOLS",
    "LOOPGUARD_CONFIG_FILE",
    "LOOPGUARD_CONVERSATION_KEYS",
    "LOOPGUARD_CYCLE_GAP_WARN",
    "LOOPGUARD_CYCLE_MAX_GAP",
    "LOOPGUARD_CYCLE_MAX_LENGTH",
    "LOOPGUARD_CYCLE_STOP",
    "LOOPGUARD_CYCLE_WARN",
    "LOOPGUARD_DETECTORS",
    "LOOPGUARD_EDITOR_TOOLS",
    "LOOPGUARD_ENABLED",
    "LOOPGUARD_ENFORCEMENT",
    "LOOPGUARD_EVIDENCE",
    "LOOPGUARD_FAILURE_PERMANENT_ANY_TARGET_WARN",
    "LOOPGUARD_FAILURE_PERMANENT_SAME_ARGS_STOP",
    "LOOPGUARD_FAILURE_PERMANENT_STOP",
    "LOOPGUARD_FAILURE_PERMANENT_WARN",
    "LOOPGUARD_FAILURE_RETRYABLE_STOP",
    "LOOPGUARD_FAILURE_RETRYABLE_WARN",
    "LOOPGUARD_HANDOFF_MAX_CYCLE",
    "LOOPGUARD_HANDOFF_STOP",
    "LOOPGUARD_HANDOFF_WINDOW",
    "LOOPGUARD_HINT_ON_WARN",
    "LOOPGUARD_IDLE_TURNS_WARN",
    "LOOPGUARD_MAX_CALLS_PER_TOOL_STOP",
    "LOOPGUARD_MAX_CALLS_PER_TOOL_WARN",
    "LOOPGUARD_MAX_PROMPT_TEMPLATES",
    "LOOPGUARD_MAX_RUNS",
    "LOOPGUARD_MAX_RUN_SECONDS_STOP",
    "LOOPGUARD_MAX_RUN_SECONDS_WARN",
    "LOOPGUARD_MAX_SERVICES",
    "LOOPGUARD_MAX_STEPS_STOP",
    "LOOPGUARD_MAX_STEPS_WARN",
    "LOOPGUARD_MAX_TOOLS",
    "LOOPGUARD_MAX_TOOL_CALLS_STOP",
    "LOOPGUARD_MAX_TOOL_CALLS_WARN",
    "LOOPGUARD_MAX_VALUE_CHARS",
    "LOOPGUARD_METRICS_ADDR",
    "LOOPGUARD_METRICS_EXPORTER",
    "LOOPGUARD_METRICS_PORT",
    "LOOPGUARD_MODE",
    "LOOPGUARD_MUTATING_FAILURE_STOP",
    "LOOPGUARD_MUTATING_FAILURE_WARN",
    "LOOPGUARD_MUTATING_TOOLS",
    "LOOPGUARD_NEAR_DUPLICATE_EMBEDDER",
    "LOOPGUARD_NEAR_DUPLICATE_JACCARD",
    "LOOPGUARD_NEAR_DUPLICATE_MIN",
    "LOOPGUARD_NEAR_DUPLICATE_SIMILARITY",
    "LOOPGUARD_NEAR_DUPLICATE_WINDOW",
    "LOOPGUARD_POLL_STOP",
    "LOOPGUARD_POLL_TOOL_PATTERNS",
    "LOOPGUARD_POLL_WARN",
    "LOOPGUARD_PROMPT_NAME_KEYS",
    "LOOPGUARD_PROMPT_VERSION_KEYS",
    "LOOPGUARD_PURE_PYTHON",
    "LOOPGUARD_READ_TOOLS",
    "LOOPGUARD_REPEAT_REPLAN",
    "LOOPGUARD_REPEAT_WARN",
    "LOOPGUARD_REREAD_WARN",
    "LOOPGUARD_RUN_KEY",
    "LOOPGUARD_RUN_TTL_SECONDS",
    "LOOPGUARD_SERVE_TOKEN",
    "LOOPGUARD_SHELL_TOOLS",
    "LOOPGUARD_STAGNATION_NO_EFFECT_WARN",
    "LOOPGUARD_STAGNATION_REPLAN",
    "LOOPGUARD_STAGNATION_STOP",
    "LOOPGUARD_STAGNATION_WARN",
    "LOOPGUARD_TOOL_KINDS",
    "LOOPGUARD_VOLATILE_KEYS",
    "LOOPGUARD_WINDOW_SIZE",
]

LOOPGUARD_CONFIG_FILE: Final = "LOOPGUARD_CONFIG_FILE"
"""Path of a TOML config file, read by ``LoopGuardConfig.load`` when no ``config_file`` is given.

The file holds a ``[loopguard]`` table (or the settings at top level) and optional
``[loopguard.tools.<name>]`` tables. Default: unset (no file; a blank value counts as unset).
Allowed: a path to a readable TOML file (UTF-8, a leading byte-order mark skipped); a missing
file or invalid TOML raises ``ConfigError``.
"""

LOOPGUARD_ENABLED: Final = "LOOPGUARD_ENABLED"
"""Whether ``opentelemetry-instrument`` installs loopguard automatically (the
``opentelemetry_post_instrument`` entry point). Default: ``true``. Allowed: ``true``, ``1``,
``yes``, ``on``; ``false``, ``0``, ``no`` or ``off`` turn it off. Any other value is logged as an
error and leaves loopguard out.
"""

LOOPGUARD_PURE_PYTHON: Final = "LOOPGUARD_PURE_PYTHON"
"""Turn the optional C accelerators off: the signatures' module, the OTLP decoder, the span
processor's and the shell reader's (at import, and when ``pip install`` builds the package: a
pure-Python wheel). Default: unset (the accelerators are used where they are built). Allowed:
any value but ``0`` turns them off. The findings are the same either way. The older spelling
``OTEL_LOOPGUARD_PURE_PYTHON`` is read too.
"""

LOOPGUARD_SERVE_TOKEN: Final = "LOOPGUARD_SERVE_TOKEN"
"""Bearer token ``otel-loopguard serve`` requires on OTLP requests (``--token-file`` wins).

Default: unset (no authentication). Allowed: any token; requests must send
``Authorization: Bearer <token>`` (compared in constant time).
"""

LOOPGUARD_TOOL_KINDS: Final = "LOOPGUARD_TOOL_KINDS"
"""Per-tool kinds, as ``tool=kind`` pairs separated by commas: ``poll_job=poll,deploy=mutating``.

Setting ``tools`` (the ``kind`` of each listed tool; per-tool thresholds need the TOML file or
code). Default: unset (kinds are inferred from tool names and results). Allowed kinds: ``read``,
``mutating``, ``poll``, ``exempt``, ``default``. A pair without ``=`` or with another kind raises
``ConfigError``.
"""

LOOPGUARD_MODE: Final = "LOOPGUARD_MODE"
"""Observe mode only reports; enforce mode lets guards block looping calls, and stop is sticky.

Setting ``mode``. Default: ``observe``. Allowed: one of ``observe``, ``enforce``.
"""

LOOPGUARD_RUN_KEY: Final = "LOOPGUARD_RUN_KEY"
"""How tool calls are grouped into runs: trace id, conversation/session id, or nearest agent span.

Setting ``run_key``. Default: ``trace``. Allowed: one of ``trace``, ``conversation``, ``agent``.
"""

LOOPGUARD_ENFORCEMENT: Final = "LOOPGUARD_ENFORCEMENT"
"""What an enforce-mode guard does on stop.

Setting ``enforcement``. Default: ``abort``. Allowed: one of ``abort``, ``hint``,
``hint_then_abort``.
"""

LOOPGUARD_HINT_ON_WARN: Final = "LOOPGUARD_HINT_ON_WARN"
"""Enforce mode: also hand the model a hint on warn (the tool still runs).

Setting ``hint_on_warn``. Default: ``false``. Allowed: ``true`` or ``false`` (also ``1``/``0``,
``yes``/``no``, ``on``/``off``).
"""

LOOPGUARD_DETECTORS: Final = "LOOPGUARD_DETECTORS"
"""Detectors that run (all by default).

Setting ``detectors``. Default: ``stagnation``, ``repeat``, ``cycle``, ``failure``,
``mutating_failure``, ``reread``, ``batch``, ``handoff``, ``near_duplicate``, ``budget``,
``idle_turns``. Allowed: a comma-separated list of detector names: ``stagnation``, ``repeat``,
``cycle``, ``failure``, ``mutating_failure``, ``reread``, ``batch``, ``handoff``,
``near_duplicate``, ``budget``, ``idle_turns``.
"""

LOOPGUARD_WINDOW_SIZE: Final = "LOOPGUARD_WINDOW_SIZE"
"""Recent tool calls that stagnation and repeat look at.

Setting ``window_size``. Default: ``12``. Allowed: an integer >= 2 and <= 1000.
"""

LOOPGUARD_STAGNATION_WARN: Final = "LOOPGUARD_STAGNATION_WARN"
"""Same call, same result: warn at this count.

Setting ``stagnation_warn``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_STAGNATION_REPLAN: Final = "LOOPGUARD_STAGNATION_REPLAN"
"""Same call, same result: replan at this count.

Setting ``stagnation_replan``. Default: ``4``. Allowed: an integer >= 2.
"""

LOOPGUARD_STAGNATION_STOP: Final = "LOOPGUARD_STAGNATION_STOP"
"""Same call, same result: stop at this count.

Setting ``stagnation_stop``. Default: ``5``. Allowed: an integer >= 2.
"""

LOOPGUARD_STAGNATION_NO_EFFECT_WARN: Final = "LOOPGUARD_STAGNATION_NO_EFFECT_WARN"
"""Same call, same result in this many world versions in a row: warn (NO_EFFECT).

Setting ``stagnation_no_effect_warn``. Default: ``6``. Allowed: an integer >= 2;
``off`` or ``none`` turns it off.
"""

LOOPGUARD_REPEAT_WARN: Final = "LOOPGUARD_REPEAT_WARN"
"""Same call, results not captured: warn at this count.

Setting ``repeat_warn``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_REPEAT_REPLAN: Final = "LOOPGUARD_REPEAT_REPLAN"
"""Same call, results not captured: replan at this count.

Setting ``repeat_replan``. Default: ``5``. Allowed: an integer >= 2.
"""

LOOPGUARD_CYCLE_MAX_LENGTH: Final = "LOOPGUARD_CYCLE_MAX_LENGTH"
"""Longest cycle (in steps) the cycle detector looks for.

Setting ``cycle_max_length``. Default: ``8``. Allowed: an integer >= 2 and <= 1000.
"""

LOOPGUARD_CYCLE_WARN: Final = "LOOPGUARD_CYCLE_WARN"
"""Cycle repetitions for warn.

Setting ``cycle_warn``. Default: ``2``. Allowed: an integer >= 2.
"""

LOOPGUARD_CYCLE_STOP: Final = "LOOPGUARD_CYCLE_STOP"
"""Cycle repetitions for stop.

Setting ``cycle_stop``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_CYCLE_MAX_GAP: Final = "LOOPGUARD_CYCLE_MAX_GAP"
"""Other calls (turns, for batch) allowed between two repetitions of a block or a batch.

Setting ``cycle_max_gap``. Default: ``4``. Allowed: an integer >= 0 and <= 100.
"""

LOOPGUARD_CYCLE_GAP_WARN: Final = "LOOPGUARD_CYCLE_GAP_WARN"
"""Block repeated with other calls between: warn at this many occurrences.

Setting ``cycle_gap_warn``. Default: ``3``. Allowed: an integer >= 2;
``off`` or ``none`` turns it off.
"""

LOOPGUARD_FAILURE_PERMANENT_SAME_ARGS_STOP: Final = "LOOPGUARD_FAILURE_PERMANENT_SAME_ARGS_STOP"
"""Permanent failure with identical arguments: stop at this count.

Setting ``failure_permanent_same_args_stop``. Default: ``2``. Allowed: an integer >= 2.
"""

LOOPGUARD_FAILURE_PERMANENT_WARN: Final = "LOOPGUARD_FAILURE_PERMANENT_WARN"
"""Same permanent error, other arguments, same target: warn.

Setting ``failure_permanent_warn``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_FAILURE_PERMANENT_STOP: Final = "LOOPGUARD_FAILURE_PERMANENT_STOP"
"""Same permanent error, other arguments, same target: stop.

Setting ``failure_permanent_stop``. Default: ``4``. Allowed: an integer >= 2.
"""

LOOPGUARD_FAILURE_PERMANENT_ANY_TARGET_WARN: Final = "LOOPGUARD_FAILURE_PERMANENT_ANY_TARGET_WARN"
"""Same permanent error on other targets, or the same unclassified error of a tool whose
arguments are not captured: warn (never stops by itself).

Setting ``failure_permanent_any_target_warn``. Default: ``5``. Allowed: an integer >= 2;
``off`` or ``none`` turns it off.
"""

LOOPGUARD_FAILURE_RETRYABLE_WARN: Final = "LOOPGUARD_FAILURE_RETRYABLE_WARN"
"""Same retryable error, identical arguments (or, not captured, the same error): warn at this count.

Setting ``failure_retryable_warn``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_FAILURE_RETRYABLE_STOP: Final = "LOOPGUARD_FAILURE_RETRYABLE_STOP"
"""Same retryable error, identical arguments: stop at this count.

Setting ``failure_retryable_stop``. Default: ``5``. Allowed: an integer >= 2.
"""

LOOPGUARD_MUTATING_FAILURE_WARN: Final = "LOOPGUARD_MUTATING_FAILURE_WARN"
"""Mutating call failing with the same error on the same target, no success on it between: warn.

Setting ``mutating_failure_warn``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_MUTATING_FAILURE_STOP: Final = "LOOPGUARD_MUTATING_FAILURE_STOP"
"""Mutating call failing with the same error on the same target, no success on it between: stop.

Setting ``mutating_failure_stop``. Default: ``4``. Allowed: an integer >= 2.
"""

LOOPGUARD_REREAD_WARN: Final = "LOOPGUARD_REREAD_WARN"
"""Same read with unchanged content anywhere in the run: warn.

Setting ``reread_warn``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_BATCH_WARN: Final = "LOOPGUARD_BATCH_WARN"
"""Same parallel batch with unchanged results in consecutive turns.

Setting ``batch_warn``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_HANDOFF_WINDOW: Final = "LOOPGUARD_HANDOFF_WINDOW"
"""Recent handoffs the handoff detector looks at.

Setting ``handoff_window``. Default: ``16``. Allowed: an integer >= 4 and <= 1000.
"""

LOOPGUARD_HANDOFF_MAX_CYCLE: Final = "LOOPGUARD_HANDOFF_MAX_CYCLE"
"""Longest handoff cycle (agents).

Setting ``handoff_max_cycle``. Default: ``5``. Allowed: an integer >= 2 and <= 64.
"""

LOOPGUARD_HANDOFF_STOP: Final = "LOOPGUARD_HANDOFF_STOP"
"""Closed handoff cycles for stop.

Setting ``handoff_stop``. Default: ``2``. Allowed: an integer >= 2.
"""

LOOPGUARD_NEAR_DUPLICATE_WINDOW: Final = "LOOPGUARD_NEAR_DUPLICATE_WINDOW"
"""Recent calls the near-duplicate detector looks at.

Setting ``near_duplicate_window``. Default: ``6``. Allowed: an integer >= 3 and <= 100.
"""

LOOPGUARD_NEAR_DUPLICATE_MIN: Final = "LOOPGUARD_NEAR_DUPLICATE_MIN"
"""Near-duplicate calls for replan.

Setting ``near_duplicate_min``. Default: ``3``. Allowed: an integer >= 2.
"""

LOOPGUARD_NEAR_DUPLICATE_JACCARD: Final = "LOOPGUARD_NEAR_DUPLICATE_JACCARD"
"""Token overlap for multi-word text arguments to count as a paraphrase.

Setting ``near_duplicate_jaccard``. Default: ``0.5``. Allowed: a number >= 0 and <= 1.
"""

LOOPGUARD_NEAR_DUPLICATE_EMBEDDER: Final = "LOOPGUARD_NEAR_DUPLICATE_EMBEDDER"
"""Embedder for multi-word text instead of token overlap, as module:function.

Setting ``near_duplicate_embedder``. Default: unset (off). Allowed: ``module:function``, the
import path of a function from a text to a list of floats; ``off`` or ``none`` turns it off.
"""

LOOPGUARD_NEAR_DUPLICATE_SIMILARITY: Final = "LOOPGUARD_NEAR_DUPLICATE_SIMILARITY"
"""Cosine similarity of two embeddings to count as a paraphrase.

Setting ``near_duplicate_similarity``. Default: ``0.8``. Allowed: a number >= 0 and <= 1.
"""

LOOPGUARD_POLL_WARN: Final = "LOOPGUARD_POLL_WARN"
"""Poll tools: unchanged results in a row for warn.

Setting ``poll_warn``. Default: ``5``. Allowed: an integer >= 2.
"""

LOOPGUARD_POLL_STOP: Final = "LOOPGUARD_POLL_STOP"
"""Poll tools: unchanged results in a row for stop.

Setting ``poll_stop``. Default: ``10``. Allowed: an integer >= 2.
"""

LOOPGUARD_MAX_TOOL_CALLS_WARN: Final = "LOOPGUARD_MAX_TOOL_CALLS_WARN"
"""Tool calls per run: warn.

Setting ``max_tool_calls_warn``. Default: ``50``. Allowed: an integer >= 1; ``off`` or ``none``
turns it off.
"""

LOOPGUARD_MAX_TOOL_CALLS_STOP: Final = "LOOPGUARD_MAX_TOOL_CALLS_STOP"
"""Tool calls per run: stop the calls past it (off by default).

Setting ``max_tool_calls_stop``. Default: unset (off). Allowed: an integer >= 1; ``off`` or
``none`` turns it off.
"""

LOOPGUARD_MAX_CALLS_PER_TOOL_WARN: Final = "LOOPGUARD_MAX_CALLS_PER_TOOL_WARN"
"""Calls of one tool per run: warn.

Setting ``max_calls_per_tool_warn``. Default: unset (off). Allowed: an integer >= 1; ``off`` or
``none`` turns it off.
"""

LOOPGUARD_MAX_CALLS_PER_TOOL_STOP: Final = "LOOPGUARD_MAX_CALLS_PER_TOOL_STOP"
"""Calls of one tool per run: stop the calls past it.

Setting ``max_calls_per_tool_stop``. Default: unset (off). Allowed: an integer >= 1; ``off`` or
``none`` turns it off.
"""

LOOPGUARD_MAX_STEPS_WARN: Final = "LOOPGUARD_MAX_STEPS_WARN"
"""Steps per run (tool calls and model turns): warn.

Setting ``max_steps_warn``. Default: unset (off). Allowed: an integer >= 1; ``off`` or ``none``
turns it off.
"""

LOOPGUARD_MAX_STEPS_STOP: Final = "LOOPGUARD_MAX_STEPS_STOP"
"""Steps per run (tool calls and model turns): stop past it.

Setting ``max_steps_stop``. Default: unset (off). Allowed: an integer >= 1; ``off`` or ``none``
turns it off.
"""

LOOPGUARD_MAX_RUN_SECONDS_WARN: Final = "LOOPGUARD_MAX_RUN_SECONDS_WARN"
"""Wall-clock seconds per run: warn.

Setting ``max_run_seconds_warn``. Default: unset (off). Allowed: a number >= 0 and <= 31536000
(one year); ``off`` or ``none`` turns it off.
"""

LOOPGUARD_MAX_RUN_SECONDS_STOP: Final = "LOOPGUARD_MAX_RUN_SECONDS_STOP"
"""Wall-clock seconds per run: stop past it.

Setting ``max_run_seconds_stop``. Default: unset (off). Allowed: a number >= 0 and <= 31536000
(one year); ``off`` or ``none`` turns it off.
"""

LOOPGUARD_IDLE_TURNS_WARN: Final = "LOOPGUARD_IDLE_TURNS_WARN"
"""Model turns in a row that call no tool, in one agent invocation: warn.

Setting ``idle_turns_warn``. Default: ``4``. Allowed: an integer >= 2; ``off`` or ``none`` turns
it off. Off when ``run_key`` is ``conversation``.
"""

LOOPGUARD_MUTATING_TOOLS: Final = "LOOPGUARD_MUTATING_TOOLS"
"""Tools that change the world, whatever their arguments (MCP names ending in __<name> too).

Setting ``mutating_tools``. Default: ``edit_file``, ``write_file``, ``delete_file``, ``patch``,
``apply_patch``, ``replace``, ``NotebookEdit``, ``KillShell``, ``save_memory``, ``create``,
``insert``, ``append``, and memory tools that write: ``core_memory_append``,
``core_memory_replace``, ``core_memory_add``, ``core_memory_remove``,
``archival_memory_insert``, ``archival_memory_add``, ``archival_memory_remove``,
``memory_replace``, ``memory_insert``, ``memory_rethink``, ``memory_append``, ``write_memory``,
``edit_memory``, ``delete_memory``. Allowed: a comma-separated list. A tool listed here is
``mutating`` for every call, even a shell or editor tool.
"""

LOOPGUARD_READ_TOOLS: Final = "LOOPGUARD_READ_TOOLS"
"""Tools whose re-reads the reread detector watches.

Setting ``read_tools``. Default: ``read_file``, ``read_many_files``, ``Glob``,
``list_directory``, ``glob``, ``search_file_content``, ``grep_search``, ``list_dir``,
``grep_files``, ``view_image``. Allowed: a comma-separated list.
"""

LOOPGUARD_POLL_TOOL_PATTERNS: Final = "LOOPGUARD_POLL_TOOL_PATTERNS"
"""Tool-name globs treated as poll tools.

Setting ``poll_tool_patterns``. Default: ``*status*``, ``poll*``, ``wait*``, ``*progress*``,
``check_job*``, ``get_job*``, ``bashoutput``, ``taskoutput``, ``write_stdin``. Allowed: a
comma-separated list.
"""

LOOPGUARD_ASK_TOOL_PATTERNS: Final = "LOOPGUARD_ASK_TOOL_PATTERNS"
"""Tool-name globs of tools that ask the user: a new result of one is the user's reply.

Setting ``ask_tool_patterns``. Default: ``ask_followup_question``, ``attempt_completion``,
``askuserquestion``, ``ask_user*``, ``ask_human*``, ``human``, ``request_user_input``.
Allowed: a comma-separated list.
"""

LOOPGUARD_SHELL_TOOLS: Final = "LOOPGUARD_SHELL_TOOLS"
"""Tools whose calls are shell commands, classified per call by the command.

Setting ``shell_tools``. Default: ``bash``, ``sh``, ``zsh``, ``shell``, ``terminal``, ``cmd``,
``command``, ``exec``, ``exec_command``, ``execute_bash``, ``execute_command``, ``local_shell``,
``run_bash``, ``run_command``, ``run_in_terminal``, ``run_shell_command``,
``run_terminal_cmd``, ``run_terminal_command``, ``shell_command``, ``command_execution``,
``container.exec``.
Allowed: a comma-separated list (compared in lower case; MCP names ending in __<name> too).
"""

LOOPGUARD_EDITOR_TOOLS: Final = "LOOPGUARD_EDITOR_TOOLS"
"""Editor tools, classified per call by their subcommand (view reads; create, str_replace change).

Setting ``editor_tools``. Default: ``str_replace_editor``, ``str_replace_based_edit_tool``,
``text_editor``, ``edit``, ``multiedit``, ``write``, ``read``, ``view``, ``view_file``,
``edit_file``, ``write_file``, ``write_to_file``, ``create_file``, ``replace_in_file``,
``search_replace``, ``apply_patch``, ``file_editor``, ``replace_string_in_file``,
``multi_replace_string_in_file``, ``insert_edit_into_file``, ``edit_notebook_file``,
``edit_notebook``, ``apply_diff``, ``insert_content``, ``search_and_replace``,
``replace_file_content``, ``multi_replace_file_content``, ``replace_file_str``. Allowed: a
comma-separated list (compared in lower case).
"""

LOOPGUARD_COMMAND_KINDS: Final = "LOOPGUARD_COMMAND_KINDS"
"""Entries added to the built-in command table, e.g. ``terraform apply=mutating``.

Setting ``command_kinds``. Default: unset (the built-in table only). Allowed: ``command=kind``
pairs separated by commas (``terraform apply=mutating,make=default``), each kind one of
``read``, ``mutating``, ``poll``, ``exempt``, ``default``; an entry wins over a built-in one
with the same command.
"""

LOOPGUARD_COMMAND_WORD_TOOLS: Final = "LOOPGUARD_COMMAND_WORD_TOOLS"
"""Read a tool named like a known command (cat, sed, git...) as a shell call of that command.

Setting ``command_word_tools``. Default: ``true``. Allowed: a boolean.
"""

LOOPGUARD_VOLATILE_KEYS: Final = "LOOPGUARD_VOLATILE_KEYS"
"""Result keys ignored when comparing results (globs).

Setting ``volatile_keys``. Default: ``*_at``, ``*_time``, ``timestamp``, ``expires*``,
``request_id``, ``*request_id``, ``trace_id``, ``span_id``, ``nonce``, ``etag``. Allowed: a
comma-separated list.
"""

LOOPGUARD_MAX_VALUE_CHARS: Final = "LOOPGUARD_MAX_VALUE_CHARS"
"""Strings longer than this are hashed in signatures.

Setting ``max_value_chars``. Default: ``4096``. Allowed: an integer >= 64.
"""

LOOPGUARD_MAX_RUNS: Final = "LOOPGUARD_MAX_RUNS"
"""Open runs kept in memory (least recently used evicted).

Setting ``max_runs``. Default: ``10000``. Allowed: an integer >= 1.
"""

LOOPGUARD_RUN_TTL_SECONDS: Final = "LOOPGUARD_RUN_TTL_SECONDS"
"""Idle seconds before a run is dropped.

Setting ``run_ttl_seconds``. Default: ``3600.0``. Allowed: a number >= 1 and <= 31536000 (one
year).
"""

LOOPGUARD_PROMPT_NAME_KEYS: Final = "LOOPGUARD_PROMPT_NAME_KEYS"
"""Attributes that name the prompt template, in order.

Setting ``prompt_name_keys``. Default: ``gen_ai.prompt.name``,
``langfuse.observation.prompt.name``, ``traceloop.prompt.key``, ``metadata.prompt_name``,
``llm.prompt_template.template``, ``metadata.prompt_template``, ``loopguard.template``. Allowed:
a comma-separated list (an entry may be a path inside a JSON attribute: ``metadata.prompt_name``
is the key ``prompt_name`` of the attribute ``metadata``).
"""

LOOPGUARD_PROMPT_VERSION_KEYS: Final = "LOOPGUARD_PROMPT_VERSION_KEYS"
"""Attributes that carry its version, in order.

Setting ``prompt_version_keys``. Default: ``gen_ai.prompt.version``,
``langfuse.observation.prompt.version``, ``traceloop.prompt.version``, ``metadata.prompt_version``,
``llm.prompt_template.version``, ``metadata.prompt_version``, ``loopguard.template_version``.
Allowed: a comma-separated list (paired by position with ``prompt_name_keys`` when both lists are
as long, so an entry may appear twice).
"""

LOOPGUARD_CONVERSATION_KEYS: Final = "LOOPGUARD_CONVERSATION_KEYS"
"""Attributes that identify a conversation (run_key = conversation).

Setting ``conversation_keys``. Default: ``gen_ai.conversation.id``, ``session.id``,
``traceloop.association.properties.session_id``. Allowed: a comma-separated list.
"""

LOOPGUARD_MAX_PROMPT_TEMPLATES: Final = "LOOPGUARD_MAX_PROMPT_TEMPLATES"
"""Distinct prompt_template label values before 'other'.

Setting ``max_prompt_templates``. Default: ``200``. Allowed: an integer >= 1.
"""

LOOPGUARD_MAX_TOOLS: Final = "LOOPGUARD_MAX_TOOLS"
"""Distinct tool label values before 'other'.

Setting ``max_tools``. Default: ``200``. Allowed: an integer >= 1.
"""

LOOPGUARD_MAX_SERVICES: Final = "LOOPGUARD_MAX_SERVICES"
"""Distinct service_name label values (serve) before 'other'.

Setting ``max_services``. Default: ``200``. Allowed: an integer >= 1.
"""

LOOPGUARD_METRICS_ADDR: Final = "LOOPGUARD_METRICS_ADDR"
"""Address of the /metrics server.

Setting ``metrics_addr``. Default: ``127.0.0.1``. Allowed: any text.
"""

LOOPGUARD_METRICS_PORT: Final = "LOOPGUARD_METRICS_PORT"
"""Port of the /metrics server that install() and opentelemetry-instrument start (off unless set).

Setting ``metrics_port``. Default: unset (off). Allowed: an integer >= 0 and <= 65535; ``off``
or ``none`` turns it off.
"""

LOOPGUARD_METRICS_EXPORTER: Final = "LOOPGUARD_METRICS_EXPORTER"
"""Where the processor's metrics go.

Setting ``metrics_exporter``. Default: ``prometheus`` (a Prometheus registry, scraped from
``/metrics``). Allowed: ``prometheus``, ``otlp`` (the same counters through the OpenTelemetry
metrics API: the global ``MeterProvider``, or one loopguard builds from the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``both``.
"""

LOOPGUARD_EVIDENCE: Final = "LOOPGUARD_EVIDENCE"
"""Where the processor writes a finding.

Setting ``evidence``. Default: ``spans`` (``loopguard.*`` attributes on the tool span, or a
``loopguard.loop_detected`` event on the agent span). Allowed: ``spans``, ``logs`` (a
``loopguard.loop_detected`` log event through the OpenTelemetry Logs API, correlated with the
tool span), ``both``.
"""
