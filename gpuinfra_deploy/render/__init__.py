"""`gpuinfra render`: every file each host of a site would get, without connecting to it.

The real deploy (deploy.py) is planned on pyinfra ``@fake`` hosts (gpuinfra_deploy/plan.py),
each host's facts answered from facts recorded on the site (``--facts``, written once by
``--record-facts``) or, where none were recorded, from a fresh host of a named distribution
(``--os``: the sets in gpuinfra_deploy/assumed_facts/). So the files are built by the very
code of the deploy: what is rendered is what the deploy uploads.

How the files are found: once the deploy is planned, each operation's commands are generated
again with the file-state facts (does the file exist, its digest, the digest of a managed
block) answered "absent", so every operation that manages a file shows its whole upload, even
where the host already holds it. Each upload is then read with the commands that follow it:

- ``cp STAGED TEMP && chmod MODE TEMP && mv -f TEMP LIVE`` (gpuinfra_deploy/ops/checked.py):
  the live file is LIVE, judged before by the consumer the operation names
  (``gpuinfra: promtool refused ...``);
- a staged upload whose stage is removed again (the worker's ``slurmd -G`` check of the
  head's files): judged only, never kept: listed, not written;
- a block spliced into a file (gpuinfra_deploy/ops/block.py): the block's lines;
- otherwise the upload's destination is the live file (``files.put``), its mode and owner
  from the ``chmod``/``chown`` after it.

Files a command writes (``printf ... > PATH``) and secrets made on the host (never seen by
this machine: gpuinfra_deploy/ops/made_on_host.py, from_head.py) are listed, not rendered.

Which facts a file depended on: the facts asked between the previous operation and the
operation that uploads it (the role's code that built the text, and the operation's own
body). A file that depended on a fact answered from an assumed set is marked ``assumed``.

The parts, each a module here: ``answers`` (the facts each host is answered with), ``site``
(the site's hosts, the deploy planned, every operation read again: :func:`render_site`),
``reading`` (the files in one operation's commands), ``model`` (:class:`Render`,
:class:`RenderedFile`), ``judges`` (the consumers run here), ``output`` (DIR and render.json)
and ``live`` (the real hosts: ``--record-facts`` and ``--diff``). The pyinfra internals they
rely on are read and swapped only through gpuinfra_deploy/pyinfra_patches/internals.py.
"""

from gpuinfra_deploy.plan import DEPLOY, MissingFact, merge_facts
from gpuinfra_deploy.render.answers import (
    ASSUMED,
    FILE_STATE,
    OS_LAYERS,
    Answers,
    assumed_facts,
    recorded_facts,
    spec_hardware,
)
from gpuinfra_deploy.render.judges import LOCAL_JUDGES, judge_here
from gpuinfra_deploy.render.live import diff_live, quote_path, record_facts, unified_diffs
from gpuinfra_deploy.render.model import Render, RenderedFile
from gpuinfra_deploy.render.output import summary, write_render
from gpuinfra_deploy.render.reading import files_of_op
from gpuinfra_deploy.render.site import render_site, site_hosts

__all__ = ["ASSUMED", "DEPLOY", "FILE_STATE", "LOCAL_JUDGES", "OS_LAYERS", "Answers",
           "MissingFact", "Render", "RenderedFile", "assumed_facts", "diff_live", "files_of_op",
           "judge_here", "merge_facts", "quote_path", "record_facts", "recorded_facts",
           "render_site", "site_hosts", "spec_hardware", "summary", "unified_diffs",
           "write_render"]
