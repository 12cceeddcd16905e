"""A customer-service retail app for coworkenv: customers with payment methods, orders and
products as entities, the retail domain's tools as command handlers, and tau2-bench's retail
tasks imported as coworkenv tasks (:mod:`coworkenv_retail.tau2`).

Installed with ``pip install -e examples/plugins/retail``, it registers ``APP`` in the
``coworkenv.apps`` entry-point group; it is not a default app, so it joins only the tasks
that name it (``apps: [directory, retail]``).
"""

from coworkenv.workspace import App, Table

from .checks import CHECKS, RULES, SQL
from .models import Customer, Order, Product

APP = App(
    "retail",
    "A retail store's customer service: customers and their payment methods, orders, products",
    {"customers": Table(Customer, "cust"), "orders": Table(Order, "ord"),
     "products": Table(Product, "prod")},
    ("coworkenv_retail.tools",),
    checks=CHECKS,
    rules=RULES,
    sql=SQL,
)

__all__ = ["APP", "Customer", "Order", "Product"]
