"""The library API: a run from Python (:class:`RunConfig`, :func:`run`, :func:`arun`), the
same one ``coworkenv run`` uses; episodes driven step by step (:class:`Sessions`,
:class:`Session`, :class:`Action`, :class:`Observation`); simulations (:class:`SimulationConfig`,
:func:`simulate`, :func:`asimulate`, the same ``coworkenv simulate`` uses), scripted
(:class:`Scenario`) or with one agent stepped from outside (:class:`SimulationSession`); a
task's reference solution played through any agent seat (:func:`play_reference`)."""

from .reference import Played, play_reference
from .run import (
    EndpointUnreachableError,
    RunConfig,
    RunResult,
    arun,
    check_db,
    check_endpoint,
    resolve_tasks,
    run,
    select_tasks,
)
from .session import Action, Observation, Session, Sessions
from .simsession import SimulationSession
from .simulate import (
    Scenario,
    SimulationConfig,
    SimulationResult,
    asimulate,
    simulate,
    simulation_report,
)

__all__ = ["Action", "EndpointUnreachableError", "Observation", "Played", "RunConfig",
           "RunResult", "Scenario", "Session", "Sessions", "SimulationConfig",
           "SimulationResult", "SimulationSession", "arun", "asimulate", "check_db",
           "check_endpoint", "play_reference", "resolve_tasks", "run", "select_tasks",
           "simulate", "simulation_report"]
