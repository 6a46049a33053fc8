"""Car Dealer with both sides learned: a seller (player 0) and a buyer (player 1) as a `TwoPlayerGame`
(`task=car_dealer_duel`, `algo=selfplay`).  Importing this module registers `car_dealer` in
`lmrl.envs.two_player.GAMES` and `SCRIPTED`.

The single-agent task (`lmrl.envs.dialogue.car_dealer`) scores a seller against the rule buyer, whose decisions come
from its hidden state.  Here either side may be a language model, so the deal is made by the text alone:

- **Turns.** The seller speaks first; the lines alternate, one line each (a move's newlines are joined into one line,
  as the single-agent env does).  After `max_utterances` lines (50) without a decision there is no deal.
- **The buyer.** A profile drawn from the seed as in the single-agent env (personality, preferred brand and type, 1-4
  features, budget), shown to the buyer only.  Its value for a car is `min(budget x (0.9 + 0.1 [its brand] + 0.1
  [its type]), 1.05 x MSRP)`: a tenth more for each preference the car meets, never much above the sticker price.
- **What the lines mean.** The seller's lines are read by the single-agent env's parser (`parse_seller`): the car
  under discussion is the last one named, and the seller's *ask* for it is the last price named (or the last ask less a
  discount it names); naming another car drops the ask and the buyer's offer.  An ask or offer must lie in
  (0, 2 x MSRP] to stand (one outside clears it), so every return is bounded (|return| <= 4).  A buyer's line (`parse_buyer`) is a
  *rejection* when it says so ("no deal", "I'll pass", "I'm out", ...), an *acceptance* when it says "deal" or "I'll
  take" and names an amount, and otherwise an *offer* when it names an amount and is not about its budget (the last
  amount named), once the seller has priced the car under discussion.
- **Deals.** A buyer's acceptance buys the car under discussion at the seller's standing ask (whatever amount the
  line names); a seller's acceptance of the buyer's standing offer ("deal", "agreed", ...) sells at that offer, or at
  the price the line names if that is not above it (as the rule buyer reads it).  Either ends the game, as does a rejection (no deal).
- **Returns** (general-sum): on a sale at price p of a car with sticker price m, with n = (budget + m) / 2 the
  single-agent task's scale, the seller gets p / n (the single-agent task's "fancy" reward) and the buyer
  (value - p) / n; no deal gives both 0.
- **Invalid moves.** An empty line, or a buyer's acceptance with no ask standing, forfeits: the mover gets
  `-forfeit_loss` (-1, below any return a deal can give either side at a sane price) and the other 0.

Observations (every line ends with a newline) are the conversation as the single-agent env writes it (`Start`, then
the lines without speaker labels), at most its latest `view_lines` lines (12; `(earlier lines not shown)` stands in
for `Start` and the rest), then the role line: `Role: seller.` or `Role: buyer. Personality: rude. Prefers a BMW SUV
with backup camera. Budget: $50,000`, then the status once the game is over.  Each observation is one training
sequence, so the window bounds a move's cost; the buyer's profile is always in view, and the seller must ask again
for what fell out of it.

Scripted players (`SCRIPTED["car_dealer"]`) play whichever side is to move: the seller side by `data_gen.car_dealer`'s
scripted sellers (`expert`, or `mix`, the dataset's mixture of expert, noisy and random sellers drawn per game), the
buyer side by the single-agent env's `RuleBuyer` on the game's profile, so `expert` against a learned seller is the
single-agent task in this game's text.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable

from lmrl.envs.dialogue.car_catalogue import Catalogue, _amounts, load_catalogue, parse_seller
from lmrl.envs.dialogue.car_dealer import MAX_UTTERANCES, PROMPT, BuyerProfile, RuleBuyer, _one_line
from lmrl.envs.two_player import GAMES, SCRIPTED, Player, ScriptedVersusEnv, TwoPlayerGame

SELLER, BUYER = 0, 1
# Lines of the conversation an observation shows (the latest), and what stands for the ones it leaves out: a move's
# cost stays bounded (every observation is one training sequence) and the role line is never cut.
VIEW_LINES = 12
EARLIER = "(earlier lines not shown)\n"
# The share of a car's MSRP below which the scripted expert seller never sells (its invoice price, say).  Without it
# the expert, written to sell to the rule buyer, takes any offer that stops rising: a buyer that repeats "$5,000"
# got the car, and a mean return of 0.41 against the expert, 12x the rule buyer's 0.033.
SELLER_FLOOR = 0.9

_REJECT = re.compile(r"\bno deal\b|\bno sale\b|\bi'?ll pass\b|\bgoing to pass\b|\bi'?m out\b|(?<!\bor )\bi'?m leaving\b|"
                     r"\bgoodbye\b|\bkeep looking\b|\bnot going to work\b|\bforget it\b|\bwaste of my time\b|"
                     r"\bnot interested\b|\bwalk(?:ing)? away\b", re.IGNORECASE)
_ACCEPT = re.compile(r"\bdeal\b|\bi'?ll take\b", re.IGNORECASE)
_BUDGET = re.compile(r"\bbudget\b|\bspend\b|\bafford\b|\bsaved\b|\bstay near\b|\bnot a cent\b|\bsqueeze\b|"
                     r"\bmoney aside\b|^\W*(?:about|around)\b", re.IGNORECASE)


@dataclass(frozen=True)
class BuyerLine:
    """What a buyer's line says under the game's rules (module docstring)."""

    rejects: bool = False
    accepts: bool = False
    offer: int | None = None


def parse_buyer(text: str) -> BuyerLine:
    """A buyer's line read by the game's rules: rejection, acceptance (a deal word and an amount), or an offer (the
    last amount named, in a line not about the budget)."""
    if _REJECT.search(text):
        return BuyerLine(rejects=True)
    prices, _ = _amounts(text)
    if _ACCEPT.search(text) and prices:
        return BuyerLine(accepts=True)
    if prices and not _BUDGET.search(text):
        return BuyerLine(offer=prices[-1])
    return BuyerLine()


class CarDealerGame(TwoPlayerGame):
    """A seller and a buyer negotiate in free text (module docstring).  `legal_actions()` is empty: any non-empty line
    is a move, read by `canonical`."""

    max_length = MAX_UTTERANCES
    forfeit_loss = 1.0
    zero_sum = False

    def __init__(self, max_utterances: int = MAX_UTTERANCES, catalogue: Catalogue | None = None,
                 view_lines: int | None = VIEW_LINES, seller_floor: float | None = SELLER_FLOOR):
        super().__init__()
        if seller_floor is not None and not 0 < float(seller_floor) <= 2:
            raise ValueError(f"seller_floor must be a share of MSRP in (0, 2] or None (no floor), got {seller_floor}")
        # The scripted expert seller's floor (SELLER_FLOOR); the game's rules do not read it.
        self.seller_floor = None if seller_floor is None else float(seller_floor)
        if view_lines is not None and int(view_lines) < 1:
            raise ValueError(f"view_lines must be a positive number of lines or None (all), got {view_lines}")
        self.view_lines = None if view_lines is None else int(view_lines)
        if int(max_utterances) < 2 or int(max_utterances) % 2:
            raise ValueError(f"max_utterances must be an even number >= 2 (seller and buyer alternate), "
                             f"got {max_utterances}")
        self.max_length = int(max_utterances)
        self.catalogue = catalogue or load_catalogue()
        self.lines: list[str] = []
        self.profile: BuyerProfile | None = None
        self.car = None
        self.ask: int | None = None
        self.offer: int | None = None
        # Whether the seller has named a price for the car under discussion (the buyer's offers count from then).
        self.priced = False
        self.sale: tuple[str, int] | None = None
        self.buyer_seed = 0.0
        # Scripted players' per-game state (a rule buyer, a scripted seller), cleared by reset.
        self.scratch: dict = {}

    def reset(self, seed: int | None = None) -> None:
        rng = random.Random(seed)
        self.buyer_seed = rng.random()
        self.profile = BuyerProfile.sample(rng, self.catalogue)
        self.lines, self.car, self.ask, self.offer, self.sale, self.scratch = [], None, None, None, None, {}
        self.priced = False
        self._start()

    def current_player(self) -> int:
        return len(self.lines) % 2

    def legal_actions(self) -> list[str]:
        """Free text: no list of moves (any non-empty line is one)."""
        return []

    def canonical(self, action: str) -> str | None:
        """The move as one line with its newline, or None (invalid) for an empty line or a buyer's acceptance with no
        ask standing."""
        if self.done:
            return None
        line = _one_line(action)
        if not line:
            return None
        if self.current_player() == BUYER and self.ask is None and parse_buyer(line).accepts:
            return None
        return line + "\n"

    def value(self, car) -> float:
        """What the buyer would pay at most for `car` (module docstring)."""
        p = self.profile
        premium = 0.9 + 0.1 * (car.brand == p.brand) + 0.1 * (p.type in car.types)
        return min(p.budget * premium, 1.05 * car.msrp)

    def forfeit_returns(self, player: int) -> tuple[float, float]:
        """The mover loses `forfeit_loss`; the other side gets nothing (no deal)."""
        return (-self.forfeit_loss, 0.0) if player == SELLER else (0.0, -self.forfeit_loss)

    def _apply(self, move: str) -> None:
        player = self.current_player()
        line = move.rstrip("\n")
        self.lines.append(line)
        if player == SELLER:
            u = parse_seller(line, self.catalogue)
            if u.cars and (self.car is None or self.car.id != u.cars[-1]):
                self.car, self.ask, self.offer, self.priced = self.catalogue.car(u.cars[-1]), None, None, False
            if self.car is not None:
                if u.accepts_offer and self.offer is not None and (u.price is None or u.price <= self.offer):
                    return self._sell(self.offer if u.price is None else u.price)
                if u.price is not None:
                    self.ask, self.priced = self._standing(u.price), True
                elif u.discount_amount is not None and self.ask is not None:
                    self.ask = self._standing(self.ask - u.discount_amount)
        else:
            b = parse_buyer(line)
            if b.rejects:
                return self._finish((0.0, 0.0))
            if b.accepts:
                return self._sell(self.ask)
            if b.offer is not None and self.priced:
                self.offer = self._standing(b.offer)
        if len(self.lines) >= self.max_length:
            self._finish((0.0, 0.0))

    def _standing(self, price: int) -> int | None:
        """`price` if it can stand as an ask or an offer for the car under discussion: above 0 and at most twice its
        sticker price (so no return is unbounded), else None."""
        return price if 0 < price <= 2 * self.car.msrp else None

    def _sell(self, price: int) -> None:
        self.sale = (self.car.id, int(price))
        scale = (self.profile.budget + self.car.msrp) / 2.0
        self._finish((price / scale, (self.value(self.car) - price) / scale))

    def observation(self, player: int) -> str:
        shown = self.lines if self.view_lines is None else self.lines[-self.view_lines:]
        cut = len(shown) < len(self.lines)
        text = (EARLIER if cut else PROMPT) + "".join(line + "\n" for line in shown)
        if player == SELLER:
            text += "Role: seller.\n"
        else:
            text += f"Role: buyer. {self.profile.describe(self.catalogue)}\n"
        return text + (self._status_line(player) if self.done else "")

    def _status_line(self, player: int) -> str:
        """How the game ended, from `player`'s side (only called once it is over)."""
        if self.forfeited_by is not None:
            who = "You" if self.forfeited_by == player else "The other side"
            return f"Game over. {who} made an invalid move. Your return: {self._returns[player]:g}.\n"
        if self.sale is None:
            return "Game over. No deal.\n"
        car, price = self.sale
        return (f"Game over. Sold: the {self.catalogue.car(car).display} for ${price:,}. "
                f"Your return: {self._returns[player]:.3f}.\n")


# --- scripted players --------------------------------------------------------------------------------------------


def _rule_buyer_line(game: CarDealerGame) -> str:
    """The single-agent env's rule buyer on the game's profile, answering the seller's last line."""
    buyer = game.scratch.get("rule_buyer")
    if buyer is None:
        buyer = game.scratch["rule_buyer"] = RuleBuyer(game.profile, game.catalogue, random.Random(game.buyer_seed))
    turn = buyer.respond(game.lines[-1], last_chance=len(game.lines) + 1 >= game.max_length)
    return _one_line(turn.text) + "\n"


def _seller_line(game: CarDealerGame, kind: str | Callable[[random.Random], str], rng: random.Random) -> str:
    """The next line of `data_gen.car_dealer`'s scripted seller of `kind` (or of the kind `kind(rng)` draws once a
    game), after it has heard the buyer's last line."""
    from data_gen.car_dealer import Seller, SellerMix  # data_gen builds on lmrl: imported when first played

    seller = game.scratch.get("seller")
    if seller is None:
        kind = kind(rng) if callable(kind) else kind
        floor = game.seller_floor if kind == "expert" else None
        seller = game.scratch["seller"] = Seller(kind, game.catalogue, rng, SellerMix(), floor=floor)
    elif game.lines:
        seller.hear(game.lines[-1], game.lines[-2].lower())
    return seller.line() + "\n"


def scripted_car_dealer(kind: str | Callable[[random.Random], str]) -> Callable[[random.Random], Player]:
    """A scripted player factory: the seller side by `kind`, the buyer side by the rule buyer."""

    def build(rng: random.Random) -> Player:
        def player(game: CarDealerGame) -> str:
            return _seller_line(game, kind, rng) if game.current_player() == SELLER else _rule_buyer_line(game)

        return player

    return build


def _dataset_kind(rng: random.Random) -> str:
    """A seller kind drawn as the Car Dealer dataset draws one (`SellerMix`'s shares)."""
    from data_gen.car_dealer import SellerMix
    from data_gen.question_games import draw_player

    mix = SellerMix()
    return draw_player(rng, mix.p_expert, mix.p_noisy)


GAMES["car_dealer"] = CarDealerGame
SCRIPTED["car_dealer"] = {"expert": scripted_car_dealer("expert"), "mix": scripted_car_dealer(_dataset_kind)}


class CarDealerVersusEnv(ScriptedVersusEnv):
    """The duel from one seat against a scripted player (`conf/task/car_dealer_duel.yaml`): seat 0 sells to the rule
    buyer, seat 1 buys from the scripted seller."""

    def __init__(self, game: str = "car_dealer", opponent: str = "expert", max_utterances: int = MAX_UTTERANCES,
                 view_lines: int | None = VIEW_LINES, seller_floor: float | None = SELLER_FLOOR):
        if game != "car_dealer":
            raise ValueError(f"CarDealerVersusEnv plays game=car_dealer, not {game!r}")
        super().__init__("car_dealer", opponent)
        self.game = CarDealerGame(max_utterances, view_lines=view_lines, seller_floor=seller_floor)

    def legal_actions(self) -> list[str] | None:
        """Free text: None (no list to choose from)."""
        return None
