"""The verifiers plugin id ``coworkenv-verifiers``: verifiers imports an environment by the name
of an installed package, so this one re-exports :mod:`coworkenv.serve.verifiers`."""

from coworkenv.serve.verifiers import (
    CoworkData,
    CoworkEnv,
    CoworkEnvConfig,
    CoworkTask,
    CoworkTaskset,
    CoworkTasksetConfig,
)

__all__ = ["CoworkData", "CoworkEnv", "CoworkEnvConfig", "CoworkTask", "CoworkTaskset",
           "CoworkTasksetConfig"]
