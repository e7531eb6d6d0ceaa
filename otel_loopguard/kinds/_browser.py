"""The names of browser and computer-use tools that act on what the agent looks at.

Data only (``_tools.is_browser_action`` reads it, and the call classifier of ``kinds`` tells a
web agent's ``goto`` from SWE-agent's viewer command by it), so that both import it at the top.
"""

from __future__ import annotations

from typing import Final

_BROWSER_PREFIXES: Final = ("browser_", "playwright_", "puppeteer_")
"""How browser-automation tools name themselves: Playwright's and Cursor's MCP servers, browser-use
and OpenHands (``browser_click``), the Playwright and Puppeteer MCP servers of the community
(``playwright_fill``, ``puppeteer_navigate``)."""
_BROWSER_ACTIONS: Final = (
    "navigate", "go_back", "go_forward", "back", "forward", "reload", "refresh", "click",
    "double_click", "right_click", "type", "input", "fill", "press", "send_keys", "select",
    "hover", "drag", "scroll", "evaluate", "run_code", "cdp", "file_upload", "upload",
    "handle_dialog", "switch_tab", "open_tab", "new_tab", "close_tab", "mouse_")
"""What a browser tool's name says after its prefix when it acts on the page (the page it
shows next is another one): ``browser_navigate``, ``browser_navigate_back``,
``browser_click``, ``browser_scroll``, ``puppeteer_fill``. A snapshot, a screenshot, the
console or the page's text only look at it."""
_PAGE_ACTIONS: Final = frozenset({
    "click", "dblclick", "double_click", "right_click", "type", "input_text", "fill",
    "clear", "press", "select_option", "drag_and_drop", "upload_file", "scroll", "scroll_up",
    "scroll_down", "goto", "visit_url", "navigate", "go_back", "go_forward", "history_back",
    "new_tab", "tab_focus", "tab_close", "close_tab",
    "drag", "fill_form", "press_key", "handle_dialog", "navigate_page", "new_page", "select_page",
    "close_page", "evaluate_script",
    "tap", "double_tap", "long_press", "swipe", "navigate_home", "navigate_back",
    "keyboard_enter", "open_app"})
"""The actions of web agents whose tools are a browser's actions by name: BrowserGym's and
WebArena's (``click``, ``fill``, ``select_option``, ``scroll``, ``goto``, ``go_back``,
``tab_focus``), Magentic-One's web surfer (``input_text``, ``visit_url``, ``history_back``),
the Chrome DevTools MCP server (``navigate_page``, ``new_page``, ``fill_form``, ``press_key``,
``evaluate_script``; its ``take_snapshot`` and ``take_screenshot`` only look), and phone agents'
(AndroidWorld's ``JSONAction``: ``long_press``, ``swipe``, ``navigate_home``, ``navigate_back``,
``keyboard_enter``, ``open_app``; AppAgent's and Mobile-Agent's ``tap``). Not
Magentic-One's ``page_down`` and ``page_up``: they take no arguments, so as actions they would
equal no other call, and the page read again and again at its bottom would go unseen; as plain
calls they page through, as a search's pages do (a new part is progress, the same one
stagnates).
Not ``hover``: a language server's MCP tool of that name (coding agents'
``mcp__language-server__hover``) reads a symbol's type; ``browser_hover`` is one."""
_SCREEN_TOOLS: Final = frozenset({"computer", "computer_use", "computer_use_preview"})
"""Computer-use tools (Anthropic's ``computer``, OpenAI's ``computer_use_preview``): one tool
whose ``action`` clicks, types, scrolls or takes a screenshot. Each call counts as an action: a
screenshot between two clicks is a look at a changed screen, the same screenshot again and again
with nothing done between is still a repeat, and the same screen after it is still stagnant."""
_PAGE_TURNS: Final = frozenset({
    "scroll", "scroll_up", "scroll_down", "scroll_page", "page_up", "page_down", "next_page",
    "previous_page", "prev_page", "load_more", "snapshot_navigate_to_next_span",
    "snapshot_navigate_to_prev_span", "snapshot_navigate_to_previous_span"})
"""Calls that move through what the agent looks at (a page, a document, a list) by the tool's
own position, not by an argument: Magentic-One's ``page_down``, TapeAgents'
``next_page_action``, the chunked-snapshot Playwright MCP server's
``browser_snapshot_navigate_to_next_span`` (``is_page_turn``)."""
