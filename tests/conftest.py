from __future__ import annotations

import os

import pytest

from coworkenv.workspace import WorkspaceSeed


def company_seed() -> WorkspaceSeed:
    """A small company used across tests: 5 employees, 1 external contact, some content."""
    return WorkspaceSeed.model_validate({
        "people": [
            {"id": "alice", "name": "Alice Chen", "email": "alice@acme.test", "role": "VP Ops",
             "team": "ops", "timezone": "America/New_York"},
            {"id": "bob", "name": "Bob Diaz", "email": "bob@acme.test", "role": "Analyst",
             "team": "finance", "manager": "alice", "timezone": "Europe/Berlin"},
            {"id": "carol", "name": "Carol Ito", "email": "carol@acme.test", "role": "Engineer",
             "team": "it", "manager": "alice"},
            {"id": "dana", "name": "Dana Ek", "email": "dana@acme.test", "role": "Recruiter",
             "team": "people", "manager": "alice"},
            {"id": "agent", "name": "Assistant", "email": "assistant@acme.test",
             "role": "AI assistant", "team": "ops", "manager": "alice"},
            {"id": "vic", "name": "Vic Vendor", "email": "vic@vendor.test", "external": True},
        ],
        "emails": [{"id": "m1", "sender": "alice", "to": ["agent"], "subject": "Q3 budget",
                    "body": "Please collect the Q3 numbers.", "thread": "m1",
                    "sent_at": "2026-03-02T13:00:00Z"}],
        "channels": [{"id": "ops", "name": "ops", "members": ["alice", "agent", "carol"]},
                     {"id": "partners", "name": "partners", "members": ["agent", "vic"],
                      "internal_only": False}],
        "chat": [{"id": "msg1", "channel": "ops", "sender": "alice", "text": "standup moved",
                  "sent_at": "2026-03-02T13:05:00Z"}],
        "calendar": [{"id": "ev1", "title": "Standup", "organizer": "alice",
                      "start": "2026-03-02T14:00:00Z", "end": "2026-03-02T14:30:00Z",
                      "attendees": {"agent": "pending", "carol": "accepted"}},
                     {"id": "ev2", "title": "1:1", "organizer": "agent",
                      "start": "2026-03-02T16:00:00Z", "end": "2026-03-02T16:30:00Z",
                      "attendees": {"bob": "pending"}}],
        "docs": [{"id": "doc1", "title": "Q3 plan", "owner": "agent", "content": "Plan: grow.",
                  "confidentiality": "internal"},
                 {"id": "doc2", "title": "Payroll 2026", "owner": "alice",
                  "content": "salaries...", "confidentiality": "confidential",
                  "permissions": {"agent": "view"}},
                 {"id": "doc3", "title": "Board notes", "owner": "alice", "content": "secret",
                  "confidentiality": "restricted"}],
        "tickets": [{"id": "T1", "title": "Laptop broken", "reporter": "bob",
                     "assignee": "carol", "priority": "high"},
                    {"id": "T2", "title": "VPN access", "reporter": "vic", "status": "open"}],
    })


@pytest.fixture
def seed() -> WorkspaceSeed:
    return company_seed()


@pytest.fixture
def broker() -> tuple[str, int]:
    host, _, port = os.environ.get("COWORKENV_TEST_BROKER", "127.0.0.1:1883").partition(":")
    return host, int(port or 1883)
