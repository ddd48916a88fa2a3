"""The pure part of the bot: which action a seat takes, at which level, and why.

Nothing here knows gRPC, NATS or Prometheus; it works on ``masa_rules`` states rebuilt from
one seat's view, so it can never use hidden information (P-20).
"""

from masa_bot.domain.choice import Decision, NothingToDecide
from masa_bot.domain.elevator import decide_elevator
from masa_bot.domain.fiftyone import decide_fiftyone

__all__ = ["Decision", "NothingToDecide", "decide_elevator", "decide_fiftyone"]
