"""Engine errors. Each carries a message that names the problem; callers map them to HTTP 4xx
or CLI exit code 2."""


class MemlaneError(Exception):
    """Base class of every error the engine raises on purpose."""


class InvalidInput(MemlaneError, ValueError):
    """A request or input value is invalid; nothing was written."""


class BankNotFound(MemlaneError, LookupError):
    def __init__(self, bank_id: str) -> None:
        super().__init__(f"unknown bank {bank_id!r}")
        self.bank_id = bank_id


class ConfigError(MemlaneError):
    """A setting points at something that is not there (a model path, a server)."""


class LLMNotConfigured(ConfigError):
    """An operation needs an LLM and none is configured for its role; the message names the
    setting to set."""
