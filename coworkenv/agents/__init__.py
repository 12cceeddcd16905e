"""Actor policies: the agent under training, teachers, simulated users and coworkers."""

from .factory import TEACHERS, AgentFactory, agent_factory, scripted_cast
from .oracle import NoopAgent, OracleAgent
from .scripted import ScriptedPerson

__all__ = ["TEACHERS", "AgentFactory", "NoopAgent", "OracleAgent", "ScriptedPerson",
           "agent_factory", "scripted_cast"]
