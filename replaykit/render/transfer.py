"""``transfer``: the trained vs untrained table (each config × model), one line each."""

from __future__ import annotations

from rich.text import Text

from replaykit.core.glossary import SHORT, legend
from replaykit.render.console import line, show_table, wrapped
from replaykit.train.intervals import signed
from replaykit.train.transfer_doc import UNTRAINED, TransferDoc, TransferRow


def transfer_table(doc: TransferDoc, rows: list[TransferRow]) -> None:
    """Each role's solved/total per config × model, then each role's paired difference against
    the untrained harness with its 95% interval."""
    roles = [h["role"] for h in doc.harnesses]
    others = [r for r in roles if r != UNTRAINED]
    cells: list[list[str | Text]] = []
    for row in rows:
        rates = row["rates"]
        cells.append(
            [
                row["config"],
                row["model"],
                *[f"{rates[r]['solved']}/{rates[r]['total']}" if r in rates else "-" for r in roles],
                *[signed(m) if (m := row["against_untrained"].get(r)) else "-" for r in others],
            ]
        )
    line(f"transfer {doc.transfer_id} of training {doc.training_id}")
    show_table(
        " · ".join(f"{h['role']} {h['sha'][:10]}" for h in doc.harnesses),
        ["config", "model", *roles, *[f"{r} − untrained" for r in others]],
        cells,
    )
    differences = ", ".join(f"{r} − untrained" for r in others)
    wrapped(legend("solved/total") + (f" · {differences} = {SHORT['− untrained']}" if others else ""))
    line(f"transfer {doc.transfer_id} stored; `replaykit report {doc.transfer_id}` draws it")
