"""Browser actions change the page: a screenshot after a click is a new observation.

Browser-automation tools (the Playwright and Puppeteer MCP servers, Cursor's browser, browser-use,
OpenHands) act on a page and look at it with separate calls: ``browser_click`` then
``browser_take_screenshot``. The look is the same call each time (a screenshot takes no
arguments), so without results (Claude Code with ``OTEL_LOG_TOOL_DETAILS=1``, Gemini CLI) it
used to count as a repeat; an action is a state change (``mutating``) now, as an edit is.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _calls import by, call, run

from otel_loopguard import LoopEngine, LoopGuardConfig
from otel_loopguard.kinds._tools import (
    _BROWSER_ACTIONS,
    _PAGE_ACTIONS,
    arguments_known,
    is_browser_action,
)


@pytest.mark.parametrize(("tool", "acts"), [
    ("browser_click", True),
    ("mcp__playwright__browser_navigate", True),
    ("mcp__playwright__browser_navigate_back", True),
    ("mcp__playwright__browser_type", True),
    ("mcp__playwright__browser_press_key", True),
    ("mcp__playwright__browser_select_option", True),
    ("mcp__playwright__browser_evaluate", True),
    ("playwright__browser_fill_form", True),  # Codex CLI's name of an MCP tool
    ("browser_scroll_down", True),
    ("browser_go_back", True),
    ("puppeteer_navigate", True),
    ("playwright_fill", True),
    ("Browser_Click", True),
    ("mcp__playwright__browser_take_screenshot", False),
    ("mcp__playwright__browser_snapshot", False),
    ("mcp__playwright__browser_console_messages", False),
    ("mcp__playwright__browser_tabs", False),
    ("browser_get_state", False),
    ("browser_wait_for", False),
    ("puppeteer_screenshot", False),
    ("click", True),  # BrowserGym's and WebArena's actions
    ("fill", True),
    ("goto", True),
    ("select_option", True),
    ("input_text", True),  # Magentic-One's web surfer
    ("page_down", False),  # Magentic-One's, without arguments: pages through, as a search
    ("history_back", True),
    ("mcp__chrome-devtools__navigate_page", True),  # the Chrome DevTools MCP server
    ("mcp__chrome-devtools__fill_form", True),
    ("mcp__chrome-devtools__click", True),
    ("mcp__chrome-devtools__take_snapshot", False),
    ("mcp__chrome-devtools__take_screenshot", False),
    ("mcp__chrome-devtools__list_console_messages", False),
    ("swipe", True),  # phone agents' (AndroidWorld's JSONAction, AppAgent, Mobile-Agent)
    ("tap", True),
    ("long_press", True),
    ("navigate_back", True),
    ("open_app", True),
    ("get_screenshot", False),
    ("web_search", False),
    ("summarize_page", False),
    ("click_counter", False),
    ("mcp__language-server__hover", False),  # a language server's hover reads a symbol's type
    ("browser_hover", True),
    ("file_browser_click", False),
    ("browser", False),
])
def test_which_tools_act_on_the_page(tool: str, acts: bool) -> None:
    assert is_browser_action(tool) is acts
    assert LoopEngine().tool_kind(tool) == ("mutating" if acts else "default")


def test_a_configured_kind_wins() -> None:
    config = LoopGuardConfig.from_mapping({"tools": {"browser_click": {"kind": "read"}}})
    assert LoopEngine(config).tool_kind("browser_click") == "read"
    config = LoopGuardConfig.from_mapping({"read_tools": ["browser_scroll"]})
    assert LoopEngine(config).tool_kind("browser_scroll") == "read"


def test_an_action_says_what_it_does_with_its_url_but_not_without_arguments() -> None:
    """A navigation's URL is what it does; going back does not say which page it leads to."""
    assert arguments_known("mutating", {"url": "https://example.com"}, "browser_navigate")
    assert not arguments_known("mutating", {"url": "https://example.com"}, "edit_file")
    assert not arguments_known("mutating", {}, "browser_go_back")


def _shot() -> dict[str, Any]:
    return call("mcp__playwright__browser_take_screenshot", {})


def _act(tool: str, **arguments: Any) -> dict[str, Any]:
    return call(f"mcp__playwright__browser_{tool}", arguments)


def test_a_screenshot_after_each_action_is_no_repeat_without_results() -> None:
    """Look, act, look again: each screenshot follows a change of the page (results absent)."""
    calls = [_act("navigate", url="http://localhost:3000"), _shot(),
             _act("click", element="Pricing", ref="e12"), _shot(),
             _act("evaluate", function="() => window.scrollTo(0, 1200)"), _shot(),
             _act("click", element="Sign up", ref="e31"), _shot(),
             _act("navigate_back"), _shot()]
    assert by(run(calls), "repeat") == {}
    # the same screenshots with nothing between them are still a repeat
    assert by(run([_shot()] * 5), "repeat") == {3: "warn", 4: "warn", 5: "replan"}


def test_a_phone_agent_swiping_down_a_list_and_looking_after_each_swipe() -> None:
    """An AndroidWorld agent swipes down a long list, a screenshot after each swipe, results
    absent: each swipe changes the screen, so neither the swipes nor the looks repeat."""
    swipe = call("swipe", {"direction": "down"})
    look = call("get_screenshot", {})
    assert by(run([swipe, look] * 4), "repeat") == {}


def test_the_same_action_back_to_back_is_still_a_loop() -> None:
    """Clicking the same element again and again, results absent: warn at the third."""
    click = _act("click", element="Submit", ref="e7")
    assert by(run([click] * 4), "repeat") == {3: "warn", 4: "warn"}


def test_scrolling_down_a_long_page_is_progress() -> None:
    """The same scroll or key again, a new part of the page each time: no finding."""
    for tool, arguments in (("scroll", {"delta_x": 0, "delta_y": 600}),
                            ("mcp__playwright__browser_press_key", {"key": "PageDown"})):
        calls = [call(tool, arguments, f"- heading 'Part {i}'") for i in range(6)]
        assert [d.code for d in run(calls) if d.flagged] == [], tool


def test_paging_down_a_document_and_stuck_at_its_bottom() -> None:
    """Magentic-One's ``page_down {}``: new parts are progress; the last part again is not."""
    parts = [call("page_down", {}, f"viewport at {20 * i}% of the page") for i in range(5)]
    assert [d.code for d in run(parts) if d.flagged] == []
    bottom = call("page_down", {}, "viewport at 100% of the page, positioned at the bottom")
    assert by(run([*parts, bottom, bottom, bottom]), "stagnation") == {8: "warn"}


@pytest.mark.parametrize("tool", ["page_down", "next_page_action", "load_more",
                                  "playwright_with_chunk-browser_snapshot_navigate_to_next_span"])
def test_paging_on_without_its_parts_captured_is_no_repeat(tool: str) -> None:
    """A page turn that takes no argument (TapeAgents' ``next_page_action {}`` ten times through
    a Wikipedia article, Magentic-One's ``page_down``, Toolathlon's span pager of a chunked page
    snapshot, its server's name joined with ``-``), its parts not captured: each call may show
    another part, so ``repeat`` does not count it (it replanned at the 5th). Any other call
    without arguments or results still does (F3)."""
    assert by(run([call(tool, {})] * 10), "repeat") == {}
    assert by(run([call("get_page_text", {})] * 5), "repeat") == {
        3: "warn", 4: "warn", 5: "replan"}


def test_scrolling_on_without_the_pages_captured_counts_from_the_fifth() -> None:
    """A scroll by the same amount, its pages not captured (an agent reading an itinerary day
    by day, a filter panel): three in a row were warned as a repeated change; now ``repeat``
    lets two pass and then only warns (from the 5th: a commit list paged down eleven times
    replanned at the 7th). A click the same way still warns at the 3rd and replans at the 5th,
    and a scroll whose page is captured is as before (a new part is progress)."""
    scroll = call("scroll", {"delta_x": 0, "delta_y": 400})
    assert by(run([scroll] * 4), "repeat") == {}
    assert by(run([scroll] * 11), "repeat") == {n: "warn" for n in range(5, 12)}
    assert by(run([call("click", {"bid": "a51"})] * 5), "repeat") == {
        3: "warn", 4: "warn", 5: "replan"}
    same = call("scroll", {"delta_x": 0, "delta_y": 400}, "- heading 'Day 3'")
    assert by(run([same] * 3), "repeat") == {3: "warn"}


def test_a_scroll_whose_result_only_says_it_scrolled_is_a_page_not_captured() -> None:
    """browser-use's ``scroll`` answers "Scrolled down the page by one page" each time; the page
    reaches the model in its next prompt. Four such scrolls through an article were a stagnant
    result replanned at the 4th; now the pages count as not captured (``repeat`` warns from the
    5th, never more). A scroll that says it could not move, the same three times, is still a
    stagnant result, and so is a line of the page itself."""
    scroll = call("scroll", {"down": True, "num_pages": 1.0},
                  "🔍 Scrolled down the page by one page")
    assert [d.code for d in run([scroll] * 4) if d.flagged] == []
    assert by(run([scroll] * 6), "repeat") == {5: "warn", 6: "warn"}
    assert by(run([scroll] * 6), "stagnation") == {}
    stuck = call("scroll", {"down": True, "num_pages": 1.0},
                 "Already at the bottom of the page, cannot scroll further")
    assert by(run([stuck] * 3), "stagnation") == {3: "warn"}
    line = call("scroll", {"down": True, "num_pages": 1.0}, "- heading 'Day 3'")
    assert by(run([line] * 3), "stagnation") == {3: "warn"}
    # browser-use 0.1's scroll_down {} reads the page: three such turns were a stagnant result
    # and a re-read; its page not captured, it is not counted, as other page turns are not
    down = call("scroll_down", {}, "🔍  Scrolled down the page by one page")
    assert [d.code for d in run([down] * 6) if d.flagged] == []


def test_a_computer_use_actions_line_of_text_is_the_screen_not_captured() -> None:
    """Anthropic's computer-use demo answers each action with one line beside its screenshot
    (``Key combination 'Page_Down' pressed.``); the screen is in the image. An agent paging
    through a site, typing the address again between, was warned a stagnant result at the
    third Page_Down: the same line is no sign of the same screen. The same click at one place,
    back to back, is still a repeated change (warn at the third, replan at the fifth)."""
    def act(action: str, result: str, **more: Any) -> dict[str, Any]:
        return call("computer", {"action": action, **more}, result)

    shot = call("computer", {"action": "screenshot"})  # an image: not captured
    page_down = act("key", "Key combination 'Page_Down' pressed.", text="Page_Down")
    address = [act("mouse_move", "Mouse moved successfully to X=320, Y=50", coordinate=[320, 50]),
               act("left_click", "Left click performed."),
               act("type", "Typed text: https://example.org/dws/", text="https://example.org/dws/"),
               act("key", "Key combination 'Return' pressed.", text="Return"), shot]
    calls = [*address, page_down, shot, *address, page_down, shot, page_down, shot]
    assert [(d.call_index, d.code) for d in run(calls) if d.flagged] == []
    click = act("left_click", "Left click performed.", coordinate=[795, 226])
    assert by(run([click] * 5), "repeat") == {3: "warn", 4: "warn", 5: "replan"}


def test_the_same_click_with_its_narration_reworded_is_a_repeat() -> None:
    """Agent TARS clicked one search button twelve times, its ``thought`` and ``step`` reworded
    each time, no page captured: each click looked like another call and nothing fired. The
    narration is no part of the call: the third click warns."""
    calls = [call("browser_vision_control", {
        "thought": f"the page did not respond ({n}), click the SEARCH button again",
        "step": f"click SEARCH, try {n}", "action": "click(point='<point>795 226</point>')"})
        for n in range(5)]
    assert by(run(calls), "repeat") == {3: "warn", 4: "warn", 5: "replan"}


def test_the_same_action_on_the_same_page_is_a_loop() -> None:
    """A click that leaves the page as it was, back to back: warn at the third."""
    click = call("click", {"bid": "a51"}, "- button 'Order now' [disabled]")
    assert by(run([click] * 4), "repeat") == {3: "warn", 4: "warn"}


def test_the_same_page_after_the_same_action_is_still_stagnant() -> None:
    """Results captured: navigating to one URL and seeing the same page is no progress."""
    page = "- heading 'Access denied' [level=1]"
    calls = [_act("navigate", url="http://localhost:3000/admin"),
             call("mcp__playwright__browser_snapshot", {}, page)] * 4
    decisions = run(calls)
    flagged = {d.call_index for d in decisions if d.flagged}
    assert flagged and min(flagged) <= 6, [(d.call_index, d.code) for d in decisions]


def test_a_language_servers_hover_is_a_read_not_a_page_action() -> None:
    """``hover`` of a language server's MCP tools (type and docs at a position) looks only.

    Hovering over four places of one file where nothing is known is not four failed changes of
    that file (no stop), and hovers between the same diagnostics do not hide that they repeat.
    """
    hover = "mcp__language-server__hover"
    missing = "failed to get hover information: no hover information available"
    calls = [call(hover, {"filePath": "/w/a.go", "line": 12 + i, "column": 5}, error=missing)
             for i in range(4)]
    assert [d.action.label for d in run(calls)] == ["continue", "continue", "warn", "warn"]
    diagnostics = call("mcp__language-server__get_diagnostics", {"filePath": "/w/a.go"},
                       "a.go:12:5 error: undefined: Foo")
    calls = [step for i in range(3) for step in (
        call(hover, {"filePath": "/w/a.go", "line": 12 + i, "column": 5}, f"type info {i}"),
        diagnostics)]
    assert by(run(calls), "stagnation") == {6: "warn"}


@pytest.mark.parametrize(("tool", "arguments", "kind"), [
    ("goto", {"url": "https://shop.test/"}, "mutating"),  # BrowserGym's and WebArena's
    ("goto", '{"url": "https://shop.test/"}', "mutating"),
    ("scroll_down", {"amount": 500}, "mutating"),
    ("goto", {"command": "goto 100"}, "read"),  # SWE-agent's file viewer
    ("goto", "goto 100", "read"),
    ("goto", {"line_number": 100}, "read"),
    ("scroll_down", {"command": "scroll_down"}, "read"),
    ("scroll_down", {}, "read"),
    ("scroll_up", None, "read"),
])
def test_a_page_action_named_like_a_viewer_command(tool: str, arguments: Any, kind: str) -> None:
    """``goto``, ``scroll_up`` and ``scroll_down`` are SWE-agent's file viewer commands too.

    A call that gives a command line, SWE-agent's ``line_number`` or nothing moves the viewer
    over a file (a read); one with other arguments (a ``url``, an ``amount``) acts on a page.
    """
    assert LoopEngine().tool_kind(tool, arguments=arguments) == kind


def test_going_back_to_a_hub_page_with_goto_is_no_repeat() -> None:
    """BrowserGym's ``goto``: the shop's home page, a category, the home page, another one."""
    home = call("goto", {"url": "https://shop.test/"}, "Title: Shop\n[a1] link 'Phones'")
    calls = [step for i, category in enumerate(("phones", "laptops", "tablets")) for step in (
        home, call("goto", {"url": f"https://shop.test/{category}"}, f"Title: {category} {i}"))]
    assert [d.code for d in run(calls) if d.flagged] == []


def test_the_documented_names_are_those_of_the_code() -> None:
    """docs/detectors.md lists every browser action word and page action name, and no other."""
    text = (Path(__file__).parent.parent / "docs" / "detectors.md").read_text(encoding="utf-8")
    item = text[text.index("for a **browser action**"):text.index("Not Magentic-One's")]
    prefixed, named = item.split("as web agents name their page actions:")
    words = {word.rstrip("…") for word in re.findall(r"`([a-z_]+…?)`", prefixed.split(
        "acts on\n   the page:")[1])} - {"navigate_back"}  # named as an example of navigate
    assert words == set(_BROWSER_ACTIONS)
    assert set(re.findall(r"`([a-z_]+)`", named)) == _PAGE_ACTIONS


def test_a_computer_use_agent_looking_after_each_action() -> None:
    """Anthropic's ``computer`` tool: click, screenshot, type, screenshot... (results absent)."""
    assert is_browser_action("computer") and is_browser_action("computer_use_preview")
    shot = call("computer", {"action": "screenshot"})
    calls = [shot, call("computer", {"action": "left_click", "coordinate": [410, 220]}), shot,
             call("computer", {"action": "type", "text": "quarterly report"}), shot,
             call("computer", {"action": "key", "text": "Return"}), shot]
    assert [d.code for d in run(calls) if d.flagged] == []
    # screenshots with nothing done between them, and the same click on an unchanged screen
    assert by(run([shot] * 4), "repeat") == {3: "warn", 4: "warn"}
    click = call("computer", {"action": "left_click", "coordinate": [410, 220]}, "screen A")
    assert by(run([click] * 3), "repeat") == {3: "warn"}
