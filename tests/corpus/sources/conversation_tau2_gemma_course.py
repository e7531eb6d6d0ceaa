"""Convert tau2-bench simulations of student-built domains (gemma-3-27b agents) into corpus runs.

Source: github.com/oscaralvaro/tau2-bench, a course fork of tau2-bench in which each student
built a customer-service domain of their own (cable TV, healthcare, restaurant, service station,
academic office, fish trader, hotel, pharmacy, e-commerce, clinic, power utility; conversations
mostly in Spanish) and ran tau2-bench's ``llm_agent`` on all of its tasks, agent
``gemini/gemma-3-27b-it`` against a ``gemma-3-12b-it`` (two files: ``gemma-3-27b-it``) user
simulator. One whole-domain result file per student branch is converted, every simulation in it
(the single-task reruns of ``filtro_gastelo``, a 3-task partial hotel run and an empty file are
left out). Files, each read at its branch head commit (listed in ``FILES``), under
``data/simulations/``.

Licence: MIT (every branch keeps tau2-bench's LICENSE), so results are kept (``content:
"full"``).

Mapping (tau2 ``SimulationRun.messages`` ordered by ``turn_idx``):
- every ``assistant`` message is one turn; its ``content`` is ``output`` (``null`` when the
  source has ``null``), its ``tool_calls`` the turn's calls in order (several in one message are
  parallel calls), ``name`` as ``tool`` and ``arguments`` as ``args``;
- the text of the ``user`` messages since the previous assistant message, joined by a blank
  line, is the turn's ``input``; tool calls made by the simulated user (``requestor: "user"``)
  are the user's, not the agent's, and are not calls of the run;
- each ``tool`` message answering an agent call is matched by ``id``; its ``content`` is the
  ``result`` (over 4,000 characters capped as FORMAT.md says); a tool message with
  ``error: true`` gives ``error`` = the result's first line (tau2 writes ``Error: ...``);
- the harness's fixed greeting (the first assistant message) is kept as a turn with no calls.

Usage: ``python conversation_tau2_gemma_course.py ROOT`` where ROOT holds each file at
``ROOT/<commit>/<path>`` (``git --git-dir=MIRROR show COMMIT:PATH``). Writes
``tests/corpus/runs/conversation/tau2_gemma_course.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
from pathlib import Path

from _tau2 import turns_of

SOURCE = "oscaralvaro/tau2-bench"
LICENCE = "MIT"
HARNESS = "tau2-bench llm_agent"
MODEL = "gemma-3-27b-it"
SLUG = "tau2_gemma_course"
FILES = [
    (
        "9419e392c3afab4344cd5e7bad05140d7746b09e",
        "data/simulations/2026-04-05T21:54:30.486492_cable_calderon_llm_agent_gemma-3-27b-it_user_simulator_gemma-3-12b-it.json",
    ),  # branch avance/maria_jose_calderon
    (
        "cddf0dcc36482a411976a0946df739999f2035f2",
        "data/simulations/2026-04-06T20:15:37.165580_healthcare_macalupu_llm_agent_gemma-3-27b-it_user_simulator_gemma-3-12b-it.json",
    ),  # branch avance/santiago-macalupu
    (
        "8c60caefddb1f1f820f36cbd74b33945adac42a2",
        "data/simulations/resultados_restaurante_joaquin_cachay_full_throttled.json",
    ),  # branch avance_Joaquin_Cachay_Cornejo
    (
        "cce80f4f0818020eb4fa38e9ec1a9cafea19753b",
        "data/simulations/simulacion_estaciondeservicio_Rivera.json",
    ),  # branch avance_diego_rivera
    (
        "6b2923e46f4b99ac0d312da75b1b07a85ed63315",
        "data/simulations/academico_jefersoncorrea_simulacion.json",
    ),  # branch avance_jefersoncorreasuncion
    (
        "b6b7e5c1c6707b6678632edede0989691533a804",
        "data/simulations/2026-04-04T19:21:40.388902_fishtrader_garbich_llm_agent_gemma-3-27b-it_user_simulator_gemma-3-12b-it.json",
    ),  # branch avance_joaquin_garbich
    (
        "07bf998c3a819a32155f513d5dd0c4e82d44772d",
        "data/simulations/hotel_calle_full_10_tasks.json",
    ),  # branch avance_jorge_calle
    (
        "3cf7cb4d233aa6d03d6ad9b59acdacba3d2603c0",
        "data/simulations/resultados_sanita_irigoin.json",
    ),  # branch dominio-Irigoin
    (
        "cb00c9d937f9cdfb3ba3a124eef38d4e8ffc1166",
        "data/simulations/ecommerce_calle_resultados_final~.json",
    ),  # branch entrega1_Calle
    (
        "0856e116cbc5ff4fd285c3a36939d698308df975",
        "data/simulations/salud_mendoza_lista_throttled_full.json",
    ),  # branch entrega_lista
    (
        "2f3eb38606aba443c07f1ab49461d9c2126f56da",
        "data/simulations/salud_mendoza_rag_throttled_full.json",
    ),  # branch entrega_rag
    (
        "79d78b9df8920ea74f901f4df014fc0b2ef38c8d",
        "data/simulations/enosa_masias_final_evidence.json",
    ),  # branch proyecto_enosa_masias
]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def main(root: Path) -> None:
    runs = []
    for commit, path in FILES:
        data = json.loads((root / commit / path).read_text(encoding="utf-8"))
        domain = data["info"]["environment_info"]["domain_name"]
        for sim in data["simulations"]:
            turns = turns_of(sim["messages"])
            content = "full"
            if any(c["result"] is None for t in turns for c in t["calls"]):
                content = "partial"
            runs.append(
                {
                    "id": f"conversation-tau2-gemma-{slug(domain)}-{slug(str(sim['task_id']))}-t{sim.get('trial', 0)}",
                    "family": "conversation",
                    "source": SOURCE,
                    "path": path,
                    "commit": commit,
                    "licence": LICENCE,
                    "harness": HARNESS,
                    "model": MODEL,
                    "content": content,
                    "turns": turns,
                }
            )
    runs.sort(key=lambda r: r["id"])
    assert len({r["id"] for r in runs}) == len(runs)
    out = Path(__file__).resolve().parents[1] / "runs" / "conversation" / f"{SLUG}.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
        for run in runs:
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    out.write_bytes(buffer.getvalue())
    print(f"{len(runs)} runs -> {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
