"""The three task domains. Each subpackage exports:

- ``TASKS``: tuple of exactgrade.task.TaskDef, ids in order (``sc-000``, ...);
- ``PROFILE``: the sandbox profile its references need ("python" or "torch");
- ``check(task) -> list[str]``: the domain's own verify checks (empty list = passed);
- optionally ``summary(tasks) -> list[str]``: lines verify prints after the domain.
"""
