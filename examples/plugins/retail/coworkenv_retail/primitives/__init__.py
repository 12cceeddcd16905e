"""The retail domain's workflow primitives, registered in the ``coworkenv.primitives``
entry-point group by this plugin's ``pyproject.toml``: a customer's requests about their
orders, each one conversation turn of authentication, listing, explicit confirmation and an
update, graded by the order's end state and the store's policy. Requirements draw them by
naming them (``primitives:`` in ``workflows/retail-support.yaml``)."""
