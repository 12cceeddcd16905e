"""What synthesized tasks are made of, shared by every primitive: the working week they
happen in, the outside companies, rooms, offices and topics a plan draws from, and how
times and amounts are written."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from ..workspace.models import parse_iso

ET = timezone(timedelta(hours=-5))  # New York before the March change to daylight time
START = datetime(2026, 3, 2, 9, 0, tzinfo=ET)  # a Monday
LATE = "d3 10:00"
"""When mid-task changes that the summary reports happen: after every question is answered
(the slowest, a hand-off, is delivered the morning after), so the agent is waiting for them."""
METRICS = ["Q3 travel spend", "cloud bill", "training budget", "hardware spend",
           "renewal value", "vendor discount", "consulting spend", "marketing budget",
           "support contract value", "office lease cost", "software licence spend",
           "conference budget"]
DELIVERABLES = ["onboarding checklist", "vendor comparison", "release notes",
                "budget summary", "hiring plan", "incident write-up"]
EXTRA_PEOPLE = [
    ("Ana Silva", "Accounts Payable", "finance", "America/New_York"),
    ("Ben Osei", "Procurement Lead", "operations", "Europe/London"),
    ("Chloe Martin", "Office Manager", "operations", "America/Chicago"),
    ("Dev Patel", "Security Engineer", "it", "Asia/Kolkata"),
    ("Eva Novak", "Product Manager", "product", "Europe/Berlin"),
    ("Felix Wong", "Data Analyst", "finance", "America/Los_Angeles"),
    ("Grace Kim", "HR Partner", "people", "America/New_York"),
    ("Hugo Silva", "Solutions Architect", "engineering", "America/Sao_Paulo")]
"""Colleagues a plan may add to the company when it needs more people than it has."""
VENDORS = ["Brightdesk", "Cloudnest", "Papertrail", "Tallyhub", "Worklane", "Quillbox"]
"""Outside companies that send the agent mail."""
ROOMS = ["Birch", "Cedar", "Harbor", "Summit", "Atlas", "Orchard", "Granite", "Willow"]
"""Meeting rooms (one word each, so a check can find one in any wording of a location)."""
OFFICES = [("Toronto", "America/Toronto"), ("Chicago", "America/Chicago"),
           ("Denver", "America/Denver"), ("Halifax", "America/Halifax"),
           ("Dublin", "Europe/Dublin"), ("Mexico City", "America/Mexico_City"),
           ("Bogota", "America/Bogota"), ("Madrid", "Europe/Madrid")]
"""Offices a meeting may be held in, with their time zones (all within a few hours of New
York's working day)."""
MEETINGS = ["Budget review", "Quarterly planning", "Roadmap review", "Vendor sync",
            "Hiring debrief", "Team retro", "Launch readiness", "Security review",
            "Customer escalation review", "Ops weekly"]
"""Meeting titles beyond a requirement's own, for plans with more meetings than it names."""
OPENINGS = ["", "", "", "Hi!", "Hello.", "Morning!", "Hi, I need a hand with something.",
            "Could you take this on for me?", "Quick request.", "Thanks for picking this up.",
            "Here's what I need.", "When you have a moment:", "Hey, one for you today.",
            "Good morning."]
"""How a request may open (often with nothing: straight to the point)."""
TOPICS = ["Laptop replacement", "VPN access", "Expense reimbursement", "New hire accounts",
          "License renewal", "Printer outage"]



def money_text(rng: random.Random, lo: int, hi: int) -> str:
    """An amount (at least $100, so that no figure reads like a clock time or a day)."""
    lo, hi = max(lo, 100), max(hi, 1000)
    return f"${rng.randint(lo, hi) // 10 * 10:,}"


def local_time(utc: str, zone: str) -> str:
    """A UTC time stamp as the wall-clock time in ``zone``, without an offset (how a person
    writes a meeting's time in an invitation sent in that zone)."""
    return parse_iso(utc).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M")


def utc(day: int, hh: int, mm: int = 0) -> str:
    t = (START.replace(hour=hh, minute=mm) + timedelta(days=day)).astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


_VERBS = re.compile(r"^(give|provide|send|confirm|share|read|look up|check|get|find|prepare|"
                    r"write|draft|make|file|open|create|raise|track|book|schedule|approve)\s+"
                    r"(the\s+|a\s+|an\s+)?", re.I)


def metric_of(step: str) -> str:
    """What a process step is about: "Give the delivery cost" -> "delivery cost"."""
    what = _VERBS.sub("", step.strip()).strip(" .")
    what = re.sub(r"\s+(document|sheet|doc|ticket|request)$", "", what, flags=re.I)
    return what.lower() or "figure"



def queue_id(name: str) -> str:
    """A ticket queue's id from its name: "IT service desk" -> "q-it-service-desk"."""
    return "q-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
