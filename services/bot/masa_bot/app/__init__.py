"""The bot's use case: decide within a time budget, record how it went."""

from masa_bot.app.decide import DecideUseCase, DecisionRecorder, Job

__all__ = ["DecideUseCase", "DecisionRecorder", "Job"]
