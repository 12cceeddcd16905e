"""The retail app's entities. Fields follow tau2-bench's retail data model (so its data loads
as it is, and a final state compares with its database field by field); each entity's ``id``
is its natural id (a user id, ``#W...`` order id, product id)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from coworkenv.workspace import Entity


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Name(_Part):
    first_name: str
    last_name: str


class Address(_Part):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class PaymentMethod(_Part):
    source: Literal["credit_card", "gift_card", "paypal"]
    id: str
    brand: str | None = Field(default=None, description="Credit cards: the brand")
    last_four: str | None = Field(default=None, description="Credit cards: the last four digits")
    balance: float | None = Field(default=None, description="Gift cards: the balance")


class Customer(Entity):
    user_id: str
    name: Name
    address: Address
    email: str
    payment_methods: dict[str, PaymentMethod]
    orders: list[str] = Field(default_factory=list, description="Order ids")


class Variant(_Part):
    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(Entity):
    name: str
    product_id: str
    variants: dict[str, Variant] = Field(description="Variant items by item id")


class OrderItem(_Part):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class Fulfillment(_Part):
    tracking_id: list[str]
    item_ids: list[str]


class Payment(_Part):
    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


OrderStatus = Literal["processed", "pending", "pending (item modified)", "delivered",
                      "cancelled", "exchange requested", "return requested"]


class Order(Entity):
    order_id: str
    user_id: str
    address: Address
    items: list[OrderItem]
    status: OrderStatus
    fulfillments: list[Fulfillment] = Field(default_factory=list)
    payment_history: list[Payment] = Field(default_factory=list)
    cancel_reason: Literal["no longer needed", "ordered by mistake"] | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None


def from_tau2(table: str, row: dict[str, object]) -> dict[str, object]:
    """A row of tau2-bench's ``db.json`` (``users``, ``orders``, ``products``) as a row of our
    table (``customers``, ``orders``, ``products``): its natural id as ``id``."""
    key = {"customers": "user_id", "orders": "order_id", "products": "product_id"}[table]
    return {"id": row[key], **row}


def to_tau2(entity: Entity) -> dict[str, object]:
    """An entity as tau2-bench's database holds it (no ``id``; unset optional fields left out
    where tau2's own models leave them out: payment methods' fields of other sources)."""
    data = entity.model_dump(mode="json", exclude={"id"})
    if isinstance(entity, Customer):
        data["payment_methods"] = {k: {f: v for f, v in pm.items() if v is not None}
                                   for k, pm in data["payment_methods"].items()}
    return data
