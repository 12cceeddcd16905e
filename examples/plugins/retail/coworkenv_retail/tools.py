"""The retail domain's tools as coworkenv command handlers.

Their observable behaviour is tau2-bench's retail domain's (the same names, arguments,
preconditions, error messages and changes to the database), written anew on coworkenv's tool
API: a call validates against the current state, raises a :class:`ToolError` (an error
observation) or emits ``ws.orders.*`` / ``ws.customers.*`` events, and returns the result.
One deliberate difference: ``modify_pending_order_items`` gives each modified item its own
new variant's price and options (tau2-bench's gives every modified item those of the last
variant in the list); the agreement report (``bench/tau2_agreement.py``) lists what that
changes.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from pydantic import Field

from coworkenv.workspace import ToolArgs, ToolContext, ToolError, tool

from .models import Address, Customer, Order, OrderItem, Payment, PaymentMethod, Product, Variant

APP = "retail"
ORDER_ID = "The order id, such as '#W0000000' (with the '#' at the beginning)"
PAYMENT_ID = ("The payment method id, such as 'gift_card_0000000' or 'credit_card_0000000' "
              "(from the user's or the order's details)")


def _order(ctx: ToolContext, order_id: str) -> Order:
    order = ctx.state.table("orders").get(order_id)
    if order is None:
        raise ToolError("not_found", "Order not found", "order_id")
    return order  # type: ignore[no-any-return]


def _customer(ctx: ToolContext, user_id: str, fieldname: str = "user_id") -> Customer:
    user = ctx.state.table("customers").get(user_id)
    if user is None:
        raise ToolError("not_found", "User not found", fieldname)
    return user  # type: ignore[no-any-return]


def _product(ctx: ToolContext, product_id: str) -> Product:
    product = ctx.state.table("products").get(product_id)
    if product is None:
        raise ToolError("not_found", "Product not found", "product_id")
    return product  # type: ignore[no-any-return]


def _variant(ctx: ToolContext, product_id: str, item_id: str, fieldname: str) -> Variant:
    variant = _product(ctx, product_id).variants.get(item_id)
    if variant is None:
        raise ToolError("not_found", "Variant not found", fieldname)
    return variant


def _payment_method(ctx: ToolContext, user_id: str, pm_id: str) -> PaymentMethod:
    pm = _customer(ctx, user_id).payment_methods.get(pm_id)
    if pm is None:
        raise ToolError("not_found", "Payment method not found", "payment_method_id")
    return pm


def _render(entity: Order | Customer | Product) -> dict[str, Any]:
    from .models import to_tau2

    return to_tau2(entity)


def _save_order(ctx: ToolContext, order: Order) -> None:
    ctx.emit("orders", "updated", order)


def _credit_gift_card(ctx: ToolContext, user_id: str, pm_id: str, amount: float) -> None:
    """Add ``amount`` (negative: take it) to a gift card's balance, rounded to cents."""
    user = _customer(ctx, user_id).model_copy(deep=True)
    pm = user.payment_methods[pm_id]
    pm.balance = round((pm.balance or 0.0) + amount, 2)
    ctx.emit("customers", "updated", user)


def _count_in(wanted: list[str], order: Order, message: str, fieldname: str) -> None:
    have = [i.item_id for i in order.items]
    for item_id in wanted:
        if wanted.count(item_id) > have.count(item_id):
            raise ToolError("not_found", message.format(item_id=item_id), fieldname)


class OrderIdArgs(ToolArgs):
    order_id: str = Field(description=ORDER_ID)


class UserIdArgs(ToolArgs):
    user_id: str = Field(description="The user id, such as 'sara_doe_496'")


class ProductIdArgs(ToolArgs):
    product_id: str = Field(description="The product id, such as '6086499569' (not an item id)")


class ItemIdArgs(ToolArgs):
    item_id: str = Field(description="The item id, such as '6086499569' (not a product id)")


class EmailArgs(ToolArgs):
    email: str = Field(description="The email of the user, such as 'something@example.com'")


class NameZipArgs(ToolArgs):
    first_name: str = Field(description="The first name of the customer, such as 'John'")
    last_name: str = Field(description="The last name of the customer, such as 'Doe'")
    zip: str = Field(description="The zip code of the customer, such as '12345'")


class NoArgs(ToolArgs):
    pass


class CalculateArgs(ToolArgs):
    expression: str = Field(description="A mathematical expression such as '2 + 2': numbers, "
                            "+, -, *, /, parentheses and spaces")


class CancelArgs(OrderIdArgs):
    reason: str = Field(description="'no longer needed' or 'ordered by mistake'")


class AddressArgs(ToolArgs):
    address1: str = Field(description="The first line of the address, such as '123 Main St'")
    address2: str = Field(description="The second line of the address, such as 'Apt 1' or ''")
    city: str = Field(description="The city, such as 'San Francisco'")
    state: str = Field(description="The state, such as 'CA'")
    country: str = Field(description="The country, such as 'USA'")
    zip: str = Field(description="The zip code, such as '12345'")

    def address(self) -> Address:
        return Address(address1=self.address1, address2=self.address2, city=self.city,
                       country=self.country, state=self.state, zip=self.zip)


class OrderAddressArgs(AddressArgs):
    order_id: str = Field(description=ORDER_ID)


class UserAddressArgs(AddressArgs):
    user_id: str = Field(description="The user id, such as 'sara_doe_496'")


class SwapArgs(OrderIdArgs):
    item_ids: list[str] = Field(description="The item ids to change, each such as "
                                "'1008292230'; an item may appear more than once")
    new_item_ids: list[str] = Field(description="The new item ids, position by position, each "
                                    "of the same product as the item it replaces")
    payment_method_id: str = Field(description=PAYMENT_ID + ", to pay or receive the price "
                                   "difference")


class ReturnArgs(OrderIdArgs):
    item_ids: list[str] = Field(description="The item ids to return; an item may appear more "
                                "than once")
    payment_method_id: str = Field(description=PAYMENT_ID + ", to receive the refund: the "
                                   "original payment method or a gift card")


class PaymentArgs(OrderIdArgs):
    payment_method_id: str = Field(description=PAYMENT_ID)


class TransferArgs(ToolArgs):
    summary: str = Field(description="A summary of the user's issue")


# reads ------------------------------------------------------------------------------------
@tool("find_user_id_by_email", APP, EmailArgs, writes=False)
def find_user_id_by_email(ctx: ToolContext, a: EmailArgs) -> dict[str, Any]:
    """Find a user id by email (any letter case). By default authenticate users this way."""
    low = a.email.lower()
    for uid, user in ctx.state.table("customers").items():
        if user.email.lower() == low:
            return {"user_id": uid}
    raise ToolError("not_found", "User not found", "email")


@tool("find_user_id_by_name_zip", APP, NameZipArgs, writes=False)
def find_user_id_by_name_zip(ctx: ToolContext, a: NameZipArgs) -> dict[str, Any]:
    """Find a user id by first name, last name (any letter case) and zip code. Use it only
    when the user is not found by email or does not remember it."""
    for uid, user in ctx.state.table("customers").items():
        if (user.name.first_name.lower() == a.first_name.lower()
                and user.name.last_name.lower() == a.last_name.lower()
                and user.address.zip == a.zip):
            return {"user_id": uid}
    raise ToolError("not_found", "User not found", "first_name")


@tool("get_user_details", APP, UserIdArgs, writes=False)
def get_user_details(ctx: ToolContext, a: UserIdArgs) -> dict[str, Any]:
    """The details of a user: name, address, email, payment methods and order ids."""
    return _render(_customer(ctx, a.user_id))


@tool("get_order_details", APP, OrderIdArgs, writes=False)
def get_order_details(ctx: ToolContext, a: OrderIdArgs) -> dict[str, Any]:
    """The status and details of an order."""
    return _render(_order(ctx, a.order_id))


@tool("get_product_details", APP, ProductIdArgs, writes=False)
def get_product_details(ctx: ToolContext, a: ProductIdArgs) -> dict[str, Any]:
    """The inventory details of a product: its variant items with options, availability and
    price."""
    return _render(_product(ctx, a.product_id))


@tool("get_item_details", APP, ItemIdArgs, writes=False)
def get_item_details(ctx: ToolContext, a: ItemIdArgs) -> dict[str, Any]:
    """The inventory details of one variant item."""
    for product in ctx.state.table("products").values():
        if a.item_id in product.variants:
            return product.variants[a.item_id].model_dump(mode="json")  # type: ignore[no-any-return]
    raise ToolError("not_found", "Item not found", "item_id")


@tool("list_all_product_types", APP, NoArgs, writes=False)
def list_all_product_types(ctx: ToolContext, a: NoArgs) -> dict[str, Any]:
    """The name and product id of every product type, sorted by name (each type has variant
    items with their own item ids and options)."""
    return dict(sorted((p.name, p.product_id) for p in ctx.state.table("products").values()))


_OPS: dict[type, Any] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                         ast.Div: operator.truediv, ast.USub: operator.neg, ast.UAdd: operator.pos}


def _arith(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_arith(node.left), _arith(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_arith(node.operand)))
    raise ValueError("not arithmetic")


@tool("calculate", APP, CalculateArgs, writes=False)
def calculate(ctx: ToolContext, a: CalculateArgs) -> dict[str, Any]:
    """Calculate a mathematical expression (numbers, + - * /, parentheses); the result is
    rounded to 2 decimals."""
    if not all(ch in "0123456789+-*/(). " for ch in a.expression):
        raise ToolError("invalid_arguments", "Invalid characters in expression", "expression")
    try:  # parsed and evaluated as arithmetic only: never executed as code
        value = _arith(ast.parse(a.expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ToolError("invalid_arguments", f"cannot calculate: {exc}", "expression") from None
    return {"result": str(round(value, 2))}


@tool("transfer_to_human_agents", APP, TransferArgs, writes=False)
def transfer_to_human_agents(ctx: ToolContext, a: TransferArgs) -> dict[str, Any]:
    """Transfer the user to a human agent with a summary of their issue: only when they ask
    for one, or when the policy and the tools cannot solve their issue."""
    return {"result": "Transfer successful"}


# writes -----------------------------------------------------------------------------------
@tool("cancel_pending_order", APP, CancelArgs, writes=True)
def cancel_pending_order(ctx: ToolContext, a: CancelArgs) -> dict[str, Any]:
    """Cancel a pending order (after listing the details and getting the user's explicit
    confirmation). Its status becomes 'cancelled' and its payments are refunded: at once to a
    gift card, otherwise in 5-7 business days."""
    order = _order(ctx, a.order_id)
    if order.status != "pending":
        raise ToolError("conflict", "Non-pending order cannot be cancelled", "order_id")
    if a.reason not in ("no longer needed", "ordered by mistake"):
        raise ToolError("invalid_arguments", "Invalid reason", "reason")
    sources = [_payment_method(ctx, order.user_id, p.payment_method_id).source
               for p in order.payment_history]  # (every lookup before the first event)
    refunds = [Payment(transaction_type="refund", amount=p.amount,
                       payment_method_id=p.payment_method_id) for p in order.payment_history]
    for p, source in zip(order.payment_history, sources, strict=True):
        if source == "gift_card":
            _credit_gift_card(ctx, order.user_id, p.payment_method_id, p.amount)
    new = order.model_copy(deep=True, update={"status": "cancelled", "cancel_reason": a.reason})
    new.payment_history.extend(refunds)
    _save_order(ctx, new)
    return _render(new)


def _price_difference(ctx: ToolContext, order: Order, a: SwapArgs,
                      same_item_refused: bool) -> tuple[float, list[Variant]]:
    if len(a.item_ids) != len(a.new_item_ids):
        raise ToolError("invalid_arguments", "The number of items to be exchanged should match",
                        "new_item_ids")
    diff = 0.0
    variants = []
    for old_id, new_id in zip(a.item_ids, a.new_item_ids, strict=True):
        if same_item_refused and old_id == new_id:
            raise ToolError("invalid_arguments", "The new item id should be different from the "
                            "old item id", "new_item_ids")
        item = next((i for i in order.items if i.item_id == old_id), None)
        if item is None:
            raise ToolError("not_found", f"Item {old_id} not found", "item_ids")
        variant = _variant(ctx, item.product_id, new_id, "new_item_ids")
        if not variant.available:
            raise ToolError("conflict", f"New item {new_id} not found or available",
                            "new_item_ids")
        diff += variant.price - item.price
        variants.append(variant)
    return diff, variants


@tool("exchange_delivered_order_items", APP, SwapArgs, writes=True)
def exchange_delivered_order_items(ctx: ToolContext, a: SwapArgs) -> dict[str, Any]:
    """Exchange items of a delivered order for other items of the same products (once per
    order; after listing the details and getting the user's explicit confirmation). Its
    status becomes 'exchange requested'; the price difference is paid or refunded with the
    given payment method."""
    order = _order(ctx, a.order_id)
    if order.status != "delivered":
        raise ToolError("conflict", "Non-delivered order cannot be exchanged", "order_id")
    _count_in(a.item_ids, order, "Number of {item_id} not found.", "item_ids")
    diff, _ = _price_difference(ctx, order, a, same_item_refused=False)
    diff = round(diff, 2)
    pm = _payment_method(ctx, order.user_id, a.payment_method_id)
    if pm.source == "gift_card" and (pm.balance or 0.0) < diff:
        raise ToolError("conflict", "Insufficient gift card balance to pay for the price "
                        "difference", "payment_method_id")
    new = order.model_copy(deep=True, update={
        "status": "exchange requested", "exchange_items": sorted(a.item_ids),
        "exchange_new_items": sorted(a.new_item_ids),
        "exchange_payment_method_id": a.payment_method_id, "exchange_price_difference": diff})
    _save_order(ctx, new)
    return _render(new)


@tool("return_delivered_order_items", APP, ReturnArgs, writes=True)
def return_delivered_order_items(ctx: ToolContext, a: ReturnArgs) -> dict[str, Any]:
    """Return items of a delivered order (after listing the details and getting the user's
    explicit confirmation). Its status becomes 'return requested'; the refund goes to the
    original payment method or a gift card."""
    order = _order(ctx, a.order_id)
    if order.status != "delivered":
        raise ToolError("conflict", "Non-delivered order cannot be returned", "order_id")
    pm = _payment_method(ctx, order.user_id, a.payment_method_id)
    if pm.source != "gift_card" and a.payment_method_id != order.payment_history[0].payment_method_id:
        raise ToolError("invalid_arguments", "Payment method should be the original payment "
                        "method", "payment_method_id")
    _count_in(a.item_ids, order, "Some item not found", "item_ids")
    new = order.model_copy(deep=True, update={
        "status": "return requested", "return_items": sorted(a.item_ids),
        "return_payment_method_id": a.payment_method_id})
    _save_order(ctx, new)
    return _render(new)


@tool("modify_pending_order_address", APP, OrderAddressArgs, writes=True)
def modify_pending_order_address(ctx: ToolContext, a: OrderAddressArgs) -> dict[str, Any]:
    """Change the shipping address of a pending order (after listing the details and getting
    the user's explicit confirmation)."""
    order = _order(ctx, a.order_id)
    if "pending" not in order.status:
        raise ToolError("conflict", "Non-pending order cannot be modified", "order_id")
    new = order.model_copy(deep=True, update={"address": a.address()})
    _save_order(ctx, new)
    return _render(new)


@tool("modify_pending_order_items", APP, SwapArgs, writes=True)
def modify_pending_order_items(ctx: ToolContext, a: SwapArgs) -> dict[str, Any]:
    """Change items of a pending order to other items of the same products (only once per
    order; after listing the details and getting the user's explicit confirmation). Its status
    becomes 'pending (item modified)'; the price difference is paid or refunded with the given
    payment method."""
    order = _order(ctx, a.order_id)
    if order.status != "pending":
        raise ToolError("conflict", "Non-pending order cannot be modified", "order_id")
    _count_in(a.item_ids, order, "{item_id} not found", "item_ids")
    diff, variants = _price_difference(ctx, order, a, same_item_refused=True)
    pm = _payment_method(ctx, order.user_id, a.payment_method_id)
    if pm.source == "gift_card" and (pm.balance or 0.0) < diff:
        raise ToolError("conflict", "Insufficient gift card balance to pay for the new item",
                        "payment_method_id")
    new = order.model_copy(deep=True, update={"status": "pending (item modified)"})
    new.payment_history.append(Payment(transaction_type="payment" if diff > 0 else "refund",
                                       amount=abs(diff), payment_method_id=a.payment_method_id))
    for old_id, variant in zip(a.item_ids, variants, strict=True):
        i = next(k for k, item in enumerate(new.items) if item.item_id == old_id)
        new.items[i] = OrderItem(name=new.items[i].name, product_id=new.items[i].product_id,
                                 item_id=variant.item_id, price=variant.price,
                                 options=dict(variant.options))
    if pm.source == "gift_card":
        _credit_gift_card(ctx, order.user_id, a.payment_method_id, -diff)
    _save_order(ctx, new)
    return _render(new)


@tool("modify_pending_order_payment", APP, PaymentArgs, writes=True)
def modify_pending_order_payment(ctx: ToolContext, a: PaymentArgs) -> dict[str, Any]:
    """Pay a pending order with another of the user's payment methods (after listing the
    details and getting the user's explicit confirmation); the original one is refunded."""
    order = _order(ctx, a.order_id)
    if "pending" not in order.status:
        raise ToolError("conflict", "Non-pending order cannot be modified", "order_id")
    pm = _payment_method(ctx, order.user_id, a.payment_method_id)
    history = order.payment_history
    if len(history) != 1 or history[0].transaction_type != "payment":
        raise ToolError("conflict", "There should be exactly one payment for a pending order",
                        "order_id")
    old_id = history[0].payment_method_id
    if old_id == a.payment_method_id:
        raise ToolError("invalid_arguments", "The new payment method should be different from "
                        "the current one", "payment_method_id")
    amount = history[0].amount
    if pm.source == "gift_card" and (pm.balance or 0.0) < amount:
        raise ToolError("conflict", "Insufficient gift card balance to pay for the order",
                        "payment_method_id")
    old_pm = _payment_method(ctx, order.user_id, old_id)
    new = order.model_copy(deep=True)
    new.payment_history.extend([
        Payment(transaction_type="payment", amount=amount, payment_method_id=a.payment_method_id),
        Payment(transaction_type="refund", amount=amount, payment_method_id=old_id)])
    if pm.source == "gift_card":
        _credit_gift_card(ctx, order.user_id, a.payment_method_id, -amount)
    if old_pm.source == "gift_card":
        _credit_gift_card(ctx, order.user_id, old_id, amount)
    _save_order(ctx, new)
    return _render(new)


@tool("modify_user_address", APP, UserAddressArgs, writes=True)
def modify_user_address(ctx: ToolContext, a: UserAddressArgs) -> dict[str, Any]:
    """Change a user's default address (after listing the details and getting the user's
    explicit confirmation)."""
    user = _customer(ctx, a.user_id)
    new = user.model_copy(deep=True, update={"address": a.address()})
    ctx.emit("customers", "updated", new)
    return _render(new)
