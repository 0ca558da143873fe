"""Rules the stateful model tests (hypothesis state machines that hold a
database in ``self.db`` and the dict that models it in ``self.model``)
share: a write made on both alike."""

from __future__ import annotations

from hypothesis.stateful import rule


def put_and_delete_rules(keys, values, **put_options):
    """A mixin of two rules: ``put`` a key (from ``keys``) to a value (from
    ``values``; ``put_options``: strategies for more keyword arguments of
    ``db.put``, sync say) and ``delete`` a key, each on the database and on
    the model."""

    class PutAndDelete:
        @rule(key=keys, value=values, **put_options)
        def put(self, key, value, **options):
            self.db.put(key, value, **options)
            self.model[key] = value

        @rule(key=keys)
        def delete(self, key):
            self.db.delete(key)
            self.model.pop(key, None)

    return PutAndDelete
