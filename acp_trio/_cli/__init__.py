"""``python -m acp_trio``: the command line (:mod:`._main`), its shared
options and reports (:mod:`._kit`) and the remote commands
(:mod:`._remote`)."""

from acp_trio._cli._main import main as main
