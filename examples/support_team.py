"""A support team, after the OpenAI Agents SDK's workshop: agents that hand off, an agent used as
a tool, typed output and an input guardrail.

    triage ──transfer_to_billing──▶ billing       get_invoice(order_id)
       │
       └──transfer_to_refunds──▶ refunds          → RefundDecision (typed output)
            (sees only the customer's words)          │
                                                      └─ tool research_order ──▶ researcher
                                                         (a child run)            lookup_order(order_id)

    guardrail on triage: no_card_numbers stops the run when the message holds a card number.

Run it against the offline test double, or a real model when OPENAI_API_KEY (or LLM_BASE_URL)
is set:

    bash scripts/demo.sh --example support_team "I was charged twice for order 1234, please refund"

or by hand: `python worker.py --tools examples.support_team` (offline: with
`python -m durable_agent_runner.testing.fake_llm --port 8400` running, LLM_BASE_URL=http://127.0.0.1:8400/v1
and LLM_MODEL=team, the scenario that plays this team), then
`python client.py run --follow --agent triage "..."`. The data is made up
and deterministic: order 1234 was charged twice, 5678 once, other numbers are invented from their
digits.
"""

from __future__ import annotations

import re
import zlib
from datetime import date, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from durable_agent_runner import (
    Agent,
    GuardrailContext,
    GuardrailResult,
    handoff,
    input_guardrail,
    tool,
)

# ----------------------------------------------------------------------------------- data


class Charge(BaseModel):
    charge_id: str
    amount: float
    currency: str
    charged_on: str  # ISO date


class Order(BaseModel):
    order_id: str
    item: str
    amount: float
    currency: str
    status: Literal["processing", "shipped", "delivered"]
    charges: list[Charge]


class Invoice(BaseModel):
    invoice_id: str
    order_id: str
    amount: float
    currency: str
    paid_with: str
    status: Literal["paid", "open"]


class RefundDecision(BaseModel):
    """The refunds agent's typed output: validated on a worker, returned as `output_object`."""

    order_id: str = Field(description="The order's number, as the customer gave it.")
    refund: bool = Field(description="True when a charge is refunded.")
    amount: float = Field(ge=0, description="How much is refunded, 0 when nothing is.")
    reason: str = Field(description="One sentence the customer will read.")


_ORDERS = {  # order id: item, price, status, times charged
    "1234": ("Wireless headphones", 89.0, "delivered", 2),
    "5678": ("Mechanical keyboard", 129.0, "shipped", 1),
}
_ITEMS = ("Desk lamp", "Running shoes", "Coffee grinder", "Backpack", "Phone case", "Water bottle")
_STATUSES: tuple[Literal["processing", "shipped", "delivered"], ...] = ("processing", "shipped", "delivered")
_FIRST_DAY = date(2025, 3, 1)


def _order(order_id: str) -> Order:
    key = order_id.strip().lstrip("#")
    if not key.isdigit():
        raise ValueError(f"no order {order_id!r}: order numbers are digits, e.g. 1234")
    seed = zlib.crc32(key.encode())
    item, price, status, times = _ORDERS.get(
        key, (_ITEMS[seed % len(_ITEMS)], float(10 + seed % 190), _STATUSES[seed % 3], 1)
    )
    day = _FIRST_DAY + timedelta(days=seed % 60)
    charges = [
        Charge(charge_id=f"ch_{key}_{i + 1}", amount=price, currency="USD", charged_on=day.isoformat())
        for i in range(times)
    ]
    return Order(order_id=key, item=item, amount=price, currency="USD", status=status, charges=charges)


# ---------------------------------------------------------------------------------- tools


@tool
def lookup_order(order_id: str) -> Order:
    """Look an order up: what was bought, its status, and every charge made for it.

    Args:
        order_id: The order's number, e.g. "1234".
    """
    return _order(order_id)


@tool
def get_invoice(order_id: str) -> Invoice:
    """The invoice of an order: its amount, how it was paid, whether it is settled.

    Args:
        order_id: The order's number, e.g. "1234".
    """
    order = _order(order_id)
    return Invoice(
        invoice_id=f"INV-{order.order_id}",
        order_id=order.order_id,
        amount=order.amount,
        currency=order.currency,
        paid_with="Visa ending 4242",
        status="paid" if order.status != "processing" else "open",
    )


# ------------------------------------------------------------------------------ guardrail

_CARD = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


@input_guardrail
def no_card_numbers(ctx: GuardrailContext, text: str) -> GuardrailResult:
    """Trips on a payment card number (13 to 19 digits, spaces or dashes allowed, passing the
    Luhn check): support never handles one, and the run stops before any agent acts on it.
    Pure Python, so it answers long before the model does; only the last four digits are kept."""
    for found in _CARD.finditer(text):
        digits = re.sub(r"\D", "", found.group())
        if _luhn(digits):
            return GuardrailResult(tripwire_triggered=True, output_info={"card_ending": digits[-4:]})
    return GuardrailResult(tripwire_triggered=False)


# --------------------------------------------------------------------------------- agents

researcher = Agent(
    name="researcher",
    instructions=(
        "You look orders up for the refunds team. Call lookup_order with the order's number, then "
        "report what the record shows: the item, its status, and every charge with its amount and "
        "date. Report facts only; decide nothing."
    ),
    tools=[lookup_order],
    handoff_description="Looks an order up and reports the facts: item, status, every charge.",
    max_turns=4,
)

refunds = Agent(
    name="refunds",
    instructions=(
        "You decide refund requests. First ask research_order about the order (give it the order's "
        "number). Refund only a charge the record shows more than once for the same amount: the "
        "amount is that duplicate charge. Otherwise refund nothing (amount 0) and say why."
    ),
    tools=[researcher.as_tool(name="research_order", description="Ask the researcher for an order's facts.")],
    output_type=RefundDecision,
    handoff_description="Refund requests: decides whether a charge of an order is refunded.",
)

billing = Agent(
    name="billing",
    instructions=(
        "You answer billing questions: invoices, charges, payment methods. Look the order's invoice "
        "up with get_invoice and answer in two sentences at most. If the customer gave no order "
        "number, ask for it."
    ),
    tools=[get_invoice],
    handoff_description="Billing questions: invoices, charges, payment methods.",
)

triage = Agent(
    name="triage",
    instructions=(
        "You are the first contact of an online shop's customer support. Never answer yourself: "
        "hand every refund request to the refunds agent, and every other question to billing."
    ),
    handoffs=[billing, handoff(refunds, input_filter="remove_tools")],
    input_guardrails=[no_card_numbers],
    max_turns=8,  # the whole run's limit, whichever agent is in charge
)
