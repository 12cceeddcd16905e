"""Simulations: a company over working days, a roster of agents under test, a workload of
arrivals and world events, on the episode kernel.

The modules, each importing only those before it (no circle):

- :mod:`.calendar`: working days and hours, simulation times;
- :mod:`.language`: the ``kind: simulation`` file's models (its JSON schema);
- :mod:`.arrivals`: arrivals, each a task template instantiated at its time;
- :mod:`.loading`: reading and checking a simulation file whole;
- :mod:`.records`: what the kernel keeps of its arrivals, what it reports;
- :mod:`.world`: the actors it adds (seats, people, timelines, outages);
- :mod:`.view`: an arrival's view of the shared log (the episode it is graded as);
- :mod:`.kernel`: the simulation kernel itself.
"""

from .arrivals import Arrival, instantiate, timed_arrivals
from .calendar import Calendar
from .language import (
    SEAT_PREFIX,
    SIM_RULE,
    Away,
    Clock,
    Join,
    Leave,
    On,
    OnMessage,
    Outage,
    Person,
    Poisson,
    Reorg,
    Route,
    Seat,
    SimChecks,
    Simulation,
    Stream,
    simulation_schema,
)
from .loading import Loaded, check_simulation, load_simulation
from .records import ArrivalOutcome, Live, Resume, SimCheck, SimulationError

__all__ = [
    "SEAT_PREFIX",
    "SIM_RULE",
    "Arrival",
    "ArrivalOutcome",
    "Away",
    "Calendar",
    "Clock",
    "Join",
    "Leave",
    "Live",
    "Loaded",
    "On",
    "OnMessage",
    "Outage",
    "Person",
    "Poisson",
    "Reorg",
    "Resume",
    "Route",
    "Seat",
    "SimCheck",
    "SimChecks",
    "Simulation",
    "SimulationError",
    "Stream",
    "check_simulation",
    "instantiate",
    "load_simulation",
    "simulation_schema",
    "timed_arrivals",
]
