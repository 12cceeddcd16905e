"""Every tool's happy path and at least one rejection; permission rules; the catalog."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest

from coworkenv.workspace import REGISTRY, WorkspaceSeed, apps, execute_tool, openai_tools

NOW = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)

# (tool, actor, arguments): each must succeed on the seed workspace
HAPPY: list[tuple[str, str, dict[str, Any]]] = [
    ("directory_search", "agent", {"query": "finance"}),
    ("directory_get_person", "agent", {"person": "bob@acme.test"}),
    ("directory_list_team", "agent", {"team": "ops"}),
    ("directory_get_manager", "agent", {"person": "bob"}),
    ("directory_get_group", "agent", {"group": "FINANCE@acme.test"}),
    ("email_send", "agent", {"to": ["bob"], "subject": "Hi", "body": "numbers?",
                             "attachments": ["doc1"]}),
    ("email_reply", "agent", {"email_id": "m1", "body": "on it"}),
    ("email_forward", "agent", {"email_id": "m1", "to": ["bob@acme.test"]}),
    ("email_read", "agent", {"email_id": "m1"}),
    ("email_list", "agent", {"folder": "inbox"}),
    ("email_search", "agent", {"query": "q3"}),
    ("email_label", "agent", {"email_id": "m1", "add": ["todo"]}),
    ("email_delete", "agent", {"email_id": "m1"}),
    ("chat_list_channels", "agent", {}),
    ("chat_post", "agent", {"channel": "#ops", "text": "hello"}),
    ("chat_send_dm", "agent", {"to": "bob", "text": "hi Bob"}),
    ("chat_read", "agent", {"channel": "ops"}),
    ("chat_search", "agent", {"query": "standup"}),
    ("chat_react", "agent", {"message_id": "msg1", "emoji": "thumbsup"}),
    ("chat_create_channel", "agent", {"name": "q3-budget", "members": ["bob"]}),
    ("chat_invite", "agent", {"channel": "ops", "person": "bob"}),
    ("calendar_create_event", "agent", {"title": "Budget review", "start": "2026-03-03T10:00",
                                        "end": "2026-03-03T10:30", "timezone": "Europe/Berlin",
                                        "attendees": ["bob"]}),
    ("calendar_update_event", "agent", {"event_id": "ev2", "start": "2026-03-02T17:00:00Z"}),
    ("calendar_cancel_event", "agent", {"event_id": "ev2"}),
    ("calendar_rsvp", "agent", {"event_id": "ev1", "response": "accepted"}),
    ("calendar_list_events", "agent", {"start": "2026-03-02T00:00:00Z",
                                       "end": "2026-03-03T00:00:00Z"}),
    ("calendar_free_busy", "agent", {"people": ["bob", "carol"], "start": "2026-03-02T13:00:00Z",
                                     "end": "2026-03-02T18:00:00Z", "duration_minutes": 60}),
    ("docs_create", "agent", {"title": "Notes", "content": "x"}),
    ("docs_read", "agent", {"doc_id": "doc2"}),
    ("docs_edit", "agent", {"doc_id": "doc1", "append": "More."}),
    ("docs_comment", "agent", {"doc_id": "doc2", "text": "looks right"}),
    ("docs_share", "agent", {"doc_id": "doc1", "person": "bob", "permission": "view"}),
    ("docs_search", "agent", {"query": "plan"}),
    ("docs_set_status", "agent", {"doc_id": "doc1", "status": "in_review"}),
    ("tickets_list_queues", "agent", {}),
    ("tickets_create", "agent", {"title": "New hire laptop", "assignee": "carol"}),
    ("tickets_read", "agent", {"ticket_id": "T1"}),
    ("tickets_assign", "agent", {"ticket_id": "T2", "assignee": "carol"}),
    ("tickets_comment", "agent", {"ticket_id": "T1", "text": "any update?"}),
    ("tickets_update", "agent", {"ticket_id": "T1", "status": "in_progress",
                                 "priority": "urgent"}),
    ("tickets_search", "agent", {"status": "open"}),
]

# (tool, actor, arguments, error code, field named in the error)
REJECT: list[tuple[str, str, dict[str, Any], str, str]] = [
    ("directory_search", "agent", {"query": 3}, "invalid_arguments", "query"),
    ("directory_get_person", "agent", {"person": "nobody"}, "not_found", "person"),
    ("directory_list_team", "agent", {"team": "marketing"}, "not_found", "team"),
    ("directory_get_manager", "agent", {"person": "alice"}, "not_found", "person"),
    ("email_send", "agent", {"to": ["zed@x.test"], "subject": "s", "body": "b"}, "not_found",
     "to[0]"),
    ("email_reply", "agent", {"email_id": "m99", "body": "x"}, "not_found", "email_id"),
    ("email_forward", "bob", {"email_id": "m1", "to": ["vic"]}, "not_found", "email_id"),
    ("email_read", "carol", {"email_id": "m1"}, "not_found", "email_id"),
    ("email_list", "agent", {"folder": "spam"}, "invalid_arguments", "folder"),
    ("email_search", "agent", {"query": ""}, "invalid_arguments", "query"),
    ("email_label", "agent", {"email_id": "m1"}, "invalid_arguments", "add"),
    ("email_delete", "bob", {"email_id": "m1"}, "not_found", "email_id"),
    ("chat_list_channels", "agent", {"extra": 1}, "invalid_arguments", "extra"),
    ("chat_post", "bob", {"channel": "ops", "text": "hi"}, "forbidden", "channel"),
    ("chat_send_dm", "agent", {"to": "agent", "text": "me"}, "invalid_arguments", "to"),
    ("chat_read", "agent", {}, "invalid_arguments", "channel"),
    ("chat_search", "agent", {}, "invalid_arguments", "query"),
    ("chat_react", "agent", {"message_id": "msg9", "emoji": "x"}, "not_found", "message_id"),
    ("chat_create_channel", "agent", {"name": "deal", "members": ["vic"]}, "forbidden",
     "members[0]"),
    ("chat_invite", "agent", {"channel": "ops", "person": "vic"}, "forbidden", "person"),
    ("calendar_create_event", "agent", {"title": "x", "start": "2026-03-03T10:00",
                                        "end": "2026-03-03T09:00"}, "invalid_arguments", "end"),
    ("calendar_update_event", "agent", {"event_id": "ev1", "title": "mine"}, "forbidden",
     "event_id"),
    ("calendar_cancel_event", "agent", {"event_id": "ev1"}, "forbidden", "event_id"),
    ("calendar_rsvp", "agent", {"event_id": "ev2", "response": "accepted"}, "conflict",
     "event_id"),
    ("calendar_list_events", "agent", {"start": "tomorrow", "end": "2026-03-03T00:00:00Z"},
     "invalid_arguments", "start"),
    ("calendar_free_busy", "agent", {"people": ["bob"], "start": "2026-03-02T13:00:00Z",
                                     "end": "2026-03-02T12:00:00Z"}, "invalid_arguments", "end"),
    ("docs_create", "agent", {"title": ""}, "invalid_arguments", "title"),
    ("docs_read", "agent", {"doc_id": "doc3"}, "forbidden", "doc_id"),
    ("docs_edit", "agent", {"doc_id": "doc2", "append": "x"}, "forbidden", "doc_id"),
    ("docs_comment", "bob", {"doc_id": "doc2", "text": "x"}, "forbidden", "doc_id"),
    ("docs_share", "alice", {"doc_id": "doc2", "person": "vic", "permission": "view"},
     "forbidden", "person"),
    ("docs_search", "agent", {"query": ""}, "invalid_arguments", "query"),
    ("tickets_create", "agent", {"title": "x", "priority": "critical"}, "invalid_arguments",
     "priority"),
    ("tickets_read", "vic", {"ticket_id": "T1"}, "forbidden", "ticket_id"),
    ("tickets_assign", "agent", {"ticket_id": "T1", "assignee": "vic"}, "forbidden", "assignee"),
    ("tickets_comment", "agent", {"ticket_id": "T9", "text": "x"}, "not_found", "ticket_id"),
    ("tickets_update", "agent", {"ticket_id": "T2", "status": "open", "priority": None,
                                 "extra": True}, "invalid_arguments", "extra"),
    ("tickets_search", "agent", {"assignee": "ghost"}, "not_found", "assignee"),
    ("directory_get_group", "agent", {"group": "nobody@acme.test"}, "not_found", "group"),
    ("docs_set_status", "agent", {"doc_id": "doc2", "status": "final"}, "forbidden", "doc_id"),
    ("tickets_list_queues", "agent", {"extra": 1}, "invalid_arguments", "extra"),
]


def test_every_tool_is_covered() -> None:
    # every tool of the built-in apps (a plugin's are covered by its own tests)
    built_in = {n for n, t in REGISTRY.items() if t.app in apps.default_apps()}
    assert {t for t, *_ in HAPPY} == built_in
    assert {t for t, *_ in REJECT} == built_in
    assert len(built_in) >= 30
    assert set(apps.default_apps()) == {"directory", "email", "chat", "calendar", "docs",
                                        "tickets"}


@pytest.mark.parametrize(("name", "actor", "args"), HAPPY, ids=[h[0] for h in HAPPY])
def test_happy_path(seed: WorkspaceSeed, name: str, actor: str, args: dict[str, Any]) -> None:
    state = seed.build()
    before = state.state_hash()
    out = execute_tool(state, actor, name, args, NOW)
    assert out.ok, out.observation
    assert "result" in out.observation
    if REGISTRY[name].writes:
        assert out.events, "a write tool must emit events"
        assert state.state_hash() != before
    elif name != "email_read":
        assert not out.events
        assert state.state_hash() == before


@pytest.mark.parametrize(("name", "actor", "args", "code", "field"), REJECT,
                         ids=[r[0] for r in REJECT])
def test_rejection(seed: WorkspaceSeed, name: str, actor: str, args: dict[str, Any], code: str,
                   field: str) -> None:
    state = seed.build()
    before = state.state_hash()
    out = execute_tool(state, actor, name, args, NOW)
    assert not out.ok
    assert out.observation["error"]["code"] == code, out.observation
    assert out.observation["error"]["field"] == field, out.observation
    assert out.observation["error"]["message"]
    assert not out.events
    assert state.state_hash() == before


def test_unknown_tool_and_non_object_arguments(seed: WorkspaceSeed) -> None:
    state = seed.build()
    assert execute_tool(state, "agent", "email_explode", {}, NOW).observation["error"]["code"] \
        == "unknown_tool"
    assert execute_tool(state, "agent", "email_list", "[]", NOW).observation["error"]["field"] \
        == "arguments"


def test_permissions(seed: WorkspaceSeed) -> None:
    state = seed.build()
    # a person cannot read a document not shared with them, until it is shared
    assert execute_tool(state, "bob", "docs_read", {"doc_id": "doc1"}, NOW).observation[
        "error"]["code"] == "forbidden"
    assert execute_tool(state, "agent", "docs_share",
                        {"doc_id": "doc1", "person": "bob", "permission": "view"}, NOW).ok
    assert execute_tool(state, "bob", "docs_read", {"doc_id": "doc1"}, NOW).ok
    # view is not edit
    assert execute_tool(state, "bob", "docs_edit", {"doc_id": "doc1", "append": "x"},
                        NOW).observation["error"]["code"] == "forbidden"
    # confidential never leaves the company; restricted is shared by its owner only
    assert execute_tool(state, "alice", "docs_share",
                        {"doc_id": "doc3", "person": "vic", "permission": "view"}, NOW
                        ).observation["error"]["code"] == "forbidden"
    # the external contact can join an open channel but not an internal-only one
    assert execute_tool(state, "agent", "chat_invite", {"channel": "ops", "person": "vic"},
                        NOW).observation["error"]["code"] == "forbidden"
    # external people see only their own tickets
    assert execute_tool(state, "vic", "tickets_read", {"ticket_id": "T2"}, NOW).ok
    found = execute_tool(state, "vic", "tickets_search", {}, NOW).observation["result"]
    assert [t["id"] for t in found["tickets"]] == ["T2"]
    # others' calendars show only busy blocks
    other = execute_tool(state, "bob", "calendar_list_events",
                         {"person": "carol", "start": "2026-03-02T00:00:00Z",
                          "end": "2026-03-03T00:00:00Z"}, NOW).observation["result"]
    assert other["events"] == [{"busy": True, "start": "2026-03-02T14:00:00Z",
                                "end": "2026-03-02T14:30:00Z"}]


def test_a_queued_ticket_is_changed_only_by_its_people(seed: WorkspaceSeed) -> None:
    """Once a ticket is in a queue, its status, priority, queue and fields are changed by its
    reporter, its assignee or the queue's members (as documents by those they are shared
    with); before, anyone in the company may triage it."""
    data = seed.model_dump()
    data["queues"] = [{"id": "q-it", "name": "IT", "members": ["carol"]}]
    state = WorkspaceSeed.model_validate(data).build()
    assert execute_tool(state, "bob", "tickets_update",
                        {"ticket_id": "T1", "priority": "high"}, NOW).ok  # triage
    assert execute_tool(state, "bob", "tickets_update",
                        {"ticket_id": "T1", "queue": "q-it"}, NOW).ok
    refused = execute_tool(state, "dana", "tickets_update",
                           {"ticket_id": "T1", "status": "closed"}, NOW)
    assert refused.observation["error"]["code"] == "forbidden"
    assert refused.observation["error"]["field"] == "ticket_id"
    assert execute_tool(state, "carol", "tickets_update",
                        {"ticket_id": "T1", "status": "in_progress"}, NOW).ok  # a member
    assert execute_tool(state, "dana", "tickets_comment",
                        {"ticket_id": "T1", "text": "any news?"}, NOW).ok  # still may comment


def test_notifications_reach_recipients(seed: WorkspaceSeed) -> None:
    state = seed.build()
    out = execute_tool(state, "agent", "email_send",
                       {"to": ["bob"], "cc": ["carol"], "subject": "s", "body": "b"}, NOW)
    assert sorted(n.person for n in out.notifications) == ["bob", "carol"]
    out = execute_tool(state, "agent", "calendar_update_event",
                       {"event_id": "ev2", "start": "2026-03-02T17:00:00Z"}, NOW)
    assert [n.person for n in out.notifications] == ["bob"]
    assert state.calendar["ev2"].end == "2026-03-02T17:30:00Z"


def test_time_zones_and_free_busy(seed: WorkspaceSeed) -> None:
    state = seed.build()
    out = execute_tool(state, "agent", "calendar_create_event",
                       {"title": "x", "start": "2026-03-03T10:00", "end": "2026-03-03T10:30",
                        "timezone": "Europe/Berlin"}, NOW).observation["result"]
    assert out["start"] == "2026-03-03T09:00:00Z"
    assert out["local_start"].startswith("2026-03-03T10:00:00+01:00")
    fb = execute_tool(state, "agent", "calendar_free_busy",
                      {"people": ["agent", "carol"], "start": "2026-03-02T13:00:00Z",
                       "end": "2026-03-02T17:00:00Z", "duration_minutes": 60}, NOW
                      ).observation["result"]
    assert fb["free"] == [{"start": "2026-03-02T13:00:00Z", "end": "2026-03-02T14:00:00Z"},
                          {"start": "2026-03-02T14:30:00Z", "end": "2026-03-02T16:00:00Z"}]


def test_catalog_is_valid_json_schema() -> None:
    schemas = openai_tools()
    assert len(schemas) >= 30
    for s in schemas:
        assert s["type"] == "function"
        assert s["function"]["description"]
        jsonschema.Draft202012Validator.check_schema(s["function"]["parameters"])


def test_reading_a_document_shows_its_newest_comments_and_their_count(
        seed: WorkspaceSeed) -> None:
    """A read shows the newest 20 comments by default (``last_comments`` more or fewer) and
    how many there are: what a read costs, and what the agent is shown, stays bounded on a
    document commented on all day."""
    state = seed.build()
    for i in range(30):
        assert execute_tool(state, "agent", "docs_comment", {"doc_id": "doc1", "text": f"n{i}"},
                            NOW).ok

    def read(**more: int) -> dict:
        out = execute_tool(state, "agent", "docs_read", {"doc_id": "doc1", **more}, NOW)
        assert out.ok, out.observation
        return out.observation["result"]

    assert [c["text"] for c in read()["comments"]] == [f"n{i}" for i in range(10, 30)]
    assert read()["comments_total"] == 30
    assert [c["text"] for c in read(last_comments=3)["comments"]] == ["n27", "n28", "n29"]
    assert read(last_comments=0)["comments"] == []
    assert len(read(last_comments=500)["comments"]) == 30
    bad = execute_tool(state, "agent", "docs_read", {"doc_id": "doc1", "last_comments": -1}, NOW)
    assert bad.observation["error"]["field"] == "last_comments"
