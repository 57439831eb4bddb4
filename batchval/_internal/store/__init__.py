"""The run's memory, below the engine and every product: the only room that holds a
connection or writes SQL. Its modules are in three groups, each importing only from
itself and the groups below it (tests/house/test_layout.py holds it, with no import cycle):

- replication (`objects` with `failures`, `azure`, `replica`, `lease`): the run's memory
  kept at a URL;
- generic (`database`, `schema`, `queue`, with `held`, `connected`, `counts`, `invocations`,
  `charges`, `derived`, `records`, `lock`): what every command shares;
- each product's tables: run's (`checkpoint`, `rows`, `book`) and streets' (`streets`),
  neither importing the other's."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
