"""What Spark itself says about a test's application, read independently of the code under test."""

from __future__ import annotations


def as_java(sc, seq):
    """A Scala Seq as a Java List, on Scala 2.12 (Spark 3.5) and 2.13 (Spark 4) alike."""
    return sc._jvm.scala.collection.JavaConverters.seqAsJavaListConverter(seq).asJava()


def executor_ids(sc) -> set[str]:
    """The ids of the application's live executors, as Spark's scheduler knows them. A shared
    application's executors are not always "0" and "1": one lost earlier in the session is replaced
    by the next id."""
    return set(as_java(sc, sc._jsc.sc().getExecutorIds()))


def block_executors(sc, rdd) -> dict[int, str]:
    """The executor holding each cached partition of ``rdd``, as the status store has them."""
    blocks = as_java(sc, sc._jsc.sc().statusStore().rdd(rdd.id()).partitions().get())
    return {int(b.blockName().rsplit("_", 1)[1]): as_java(sc, b.executors())[0] for b in blocks}
