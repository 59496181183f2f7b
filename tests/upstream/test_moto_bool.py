"""Upstream watch (moto): moto 5.2.5 stores a ``BOOL`` written by DynamoDB's ``UpdateItem``
``AttributeUpdates`` as the string ``"True"``. Delta's DynamoDB commit coordinator writes
``hasAcceptedCommits`` that way and reads it back with ``getBOOL()``, so deltalab.objectstore
patches moto in its server process (``_store_bools_as_bools``).

When it fails: moto keeps such BOOLs by itself (a moto upgrade in requirements.lock fixed it).
Remove ``_store_bools_as_bools``, its call and the paragraph about it in deltalab.objectstore's
docstring, then delete this file. tests/test_objectstore.py's
``test_dynamodb_keeps_bools_written_by_attribute_updates`` goes on checking the behaviour itself.
"""

from __future__ import annotations

import pytest


def test_moto_still_needs_the_bool_fix():
    """If this fails, moto stores BOOLs right by itself: remove _store_bools_as_bools."""
    from moto.dynamodb.models.dynamo_type import Item

    if getattr(Item.update_with_attribute_updates, "_deltalab_fixed", False):
        pytest.skip("this process already applied the fix")
    item = Item(hash_key=None, range_key=None, attrs={"id": {"S": "t"}})
    item.update_with_attribute_updates({"done": {"Value": {"BOOL": True}, "Action": "PUT"}})
    assert item.attrs["done"].type != "BOOL", "moto 5.2.5 stores it as a string"
