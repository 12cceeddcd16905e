"""Actor policies: the agent under training, teachers, simulated users and coworkers."""

from .chat import agent_tools, agent_view
from .factory import (
    AGENT_SPECS,
    AgentFactory,
    AgentSpec,
    CastFactory,
    agent_factory,
    cast_factory,
    parse_agent,
    persistent_factory,
    scripted_cast,
)
from .load import LoadAgent, office_mix
from .openai_agent import Endpoint, OpenAIAgent
from .oracle import NoopAgent, OracleAgent
from .persistent import PersistentModelAgent, PersistentOracle
from .persona import LLMPerson
from .playbook import Playbook
from .scripted import ScriptedPerson

__all__ = ["AGENT_SPECS", "AgentFactory", "AgentSpec", "CastFactory", "Endpoint", "LLMPerson",
           "LoadAgent", "NoopAgent", "OpenAIAgent", "OracleAgent", "PersistentModelAgent",
           "PersistentOracle", "Playbook", "ScriptedPerson", "agent_factory", "agent_tools",
           "agent_view", "cast_factory", "office_mix", "parse_agent", "persistent_factory",
           "scripted_cast"]
