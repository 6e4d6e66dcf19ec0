"""What Spark itself says about a test's application, read independently of the code under test."""

from __future__ import annotations


def executor_ids(sc) -> set[str]:
    """The ids of the application's live executors, as Spark's scheduler knows them. A shared
    application's executors are not always "0" and "1": one lost earlier in the session is replaced
    by the next id."""
    ids = sc._jsc.sc().getExecutorIds()
    return set(sc._jvm.scala.jdk.javaapi.CollectionConverters.asJava(ids))
