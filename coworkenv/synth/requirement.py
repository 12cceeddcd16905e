"""A workflow requirement: what a person writes to describe a job."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..sim.task import Capability

Difficulty = Literal["easy", "medium", "hard"]


class Parameters(BaseModel):
    """What varies between generated instances."""

    model_config = ConfigDict(extra="forbid")
    people: list[str] = Field(min_length=2, description="Person ids (of the company) who may "
                              "play coworkers")
    metrics: list[str] = Field(default_factory=lambda: ["Q3 travel spend"],
                               description="Figures someone may be asked for")
    amounts: tuple[int, int] = Field(default=(1_000, 90_000), description="Range of amounts")
    meeting_titles: list[str] = Field(default_factory=lambda: ["Sync"])
    days: list[str] = Field(default_factory=lambda: ["2026-03-03", "2026-03-04", "2026-03-05"],
                            description="Dates (YYYY-MM-DD) for meetings")
    documents: list[str] = Field(default_factory=lambda: ["Integration deck"],
                                 description="Names of documents to share")
    ticket_topics: list[str] = Field(default_factory=lambda: ["VPN drops"])


class WorkflowRequirement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    role: str = Field(description="Who does the work")
    goal: str = Field(description="What the work is for")
    company: str = Field(default="acme", description="The company the tasks happen in")
    user: str = Field(default="maya", description="Person id who assigns the work")
    agent: str = Field(default="assistant", description="Person id the agent acts as")
    apps: list[str] = Field(min_length=1, description="The apps the work uses: the built-in "
                            "directory, email, chat, calendar, docs, tickets, or an installed "
                            "plugin's")
    primitives: list[str] | None = Field(default=None, description="The workflow primitives "
                                         "plans are drawn from (a plugin's, say); default: the "
                                         "built-in office ones")
    capabilities: dict[Capability, float] = Field(min_length=1, description="Capabilities to "
                                                  "exercise, with weights")
    parameters: Parameters
    constraints: list[str] = Field(default_factory=list)
    difficulty: tuple[Difficulty, Difficulty] = ("easy", "hard")
    process: dict[str, Any] | None = Field(default=None, description="The process graph it was "
                                           "read from (a BPMN file), which plans follow")

    @field_validator("apps")
    @classmethod
    def _installed_apps(cls, v: list[str]) -> list[str]:
        from ..workspace.apps import installed

        known = {a.name for a in installed()}
        bad = [a for a in v if a not in known]
        if bad:
            raise ValueError(f"no installed app {bad[0]!r} (installed: "
                             f"{', '.join(sorted(known))})")
        return v

    @model_validator(mode="after")
    def _weights(self) -> WorkflowRequirement:
        bad = {k: v for k, v in self.capabilities.items() if v <= 0}
        if bad:
            raise ValueError(f"capabilities: weights must be > 0, got {bad}")
        return self
