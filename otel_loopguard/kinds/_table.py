"""The built-in table of shell command kinds, and the words the shell parser treats specially.

``otel_loopguard.kinds`` reads these; ``docs/detectors.md`` ("Call kinds") describes them for
users. A key is a command word, optionally followed by subcommand words and options that must be
present (``git diff``, ``sed -i``, ``python setup.py install``); the most specific matching key
wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["DEFAULT_COMMAND_KINDS", "IGNORED_WORDS", "KEYWORDS", "MODULE_RUNNERS",
           "PACKAGE_RUNNERS", "PYTHON_FLAGS", "PYTHON_VALUE_OPTIONS", "RUNNER_GLOBAL_OPTIONS",
           "SCRIPT_RUNNERS", "SHELLS", "WRAPPERS", "WRAPPER_VALUE_OPTIONS", "RunnerOptions"]


def _each(kind: str, keys: str) -> dict[str, str]:
    """Return ``kind`` for each comma-separated key of ``keys``."""
    return dict.fromkeys((key.strip() for key in keys.split(",") if key.strip()), kind)


_READS: Final = _each("read", """
    cat, tac, nl, head, tail, less, more, bat, ls, ll, la, dir, tree, exa, eza, pwd, echo, printf,
    grep, egrep, fgrep, rg, ag, ack, find, fd, locate, which, whereis, type, file, stat, wc, du, df,
    free, nproc, uname, hostname, whoami, id, groups, date, uptime, env, printenv, ps, lsof,
    netstat, ss, diff, cmp, comm, sort, uniq, cut, tr, column, paste, join, fold, rev, jq, yq, xxd,
    od, hexdump, strings, md5sum, sha1sum, sha256sum, sha512sum, cksum, realpath, readlink, dirname,
    basename, test, [, [[, seq, expr, bc, read, history, man, help, info, lsblk, lscpu, dmesg,
    journalctl, awk, gawk, sed, view, command -v, command -V, ldconfig -p, dpkg -l, dpkg -s,
    dpkg -L, rpm -q, qemu-img info, apt list, apt show, apt search, apt-cache, conda list,
    conda info, conda search, brew list, brew info, systemctl status, crontab -l, docker ps,
    docker images, docker logs, docker inspect, docker compose ps, docker compose logs,
    docker compose config, docker compose images, docker compose ls, docker compose top,
    docker-compose ps, docker-compose logs, docker-compose config, docker-compose images,
    docker-compose top, kubectl get, kubectl describe, kubectl logs, kubectl top, kubectl explain,
    kubectl version, kubectl api-resources, kubectl cluster-info, kubectl config view,
    kubectl rollout history, helm list, helm ls, helm status, helm history, helm get,
    gh pr view, gh pr list, gh pr diff, gh issue view, gh issue list, gh repo view,
    gh release view, gh release list,
    terraform plan, terraform show, terraform validate, terraform output, go env, go version,
    go list, gofmt, cargo tree, cargo metadata, open, goto, scroll_up, scroll_down, find_file,
    search_dir, search_file, tar -t, tar --list
""")
"""Commands that only look: files, processes, the environment (SWE-agent's viewer words too)."""

_WRITES: Final = _each("mutating", """
    rm, rmdir, mv, cp, mkdir, touch, chmod, chown, chgrp, ln, install, truncate, dd, patch, shred,
    unlink, rsync, scp, tee, unzip, gunzip, gzip, bunzip2, bzip2, xz, unxz, zip, tar, mount, umount,
    kill, pkill, killall, ed, ex, vi, vim, nvim, nano, emacs, wget, sed -i, sed --in-place, perl -i,
    awk -i, gawk -i, sort -o, find -delete, dpkg -i, ldconfig, curl -o, curl -O, curl --output,
    create, edit, insert, append, systemctl, service, crontab, useradd, userdel, usermod, chpasswd,
    black, isort, autopep8 -i, autopep8 --in-place, ruff format,
    ruff check --fix, ruff --fix, prettier --write, eslint --fix, gofmt -w, clang-format -i,
    cargo fmt, go fmt, venv, virtualenv, apply_patch, applypatch
""")
"""Commands that change files, packages, processes or services (``apply_patch``: Codex CLI's
edits, run through its shell tool as ``["apply_patch", PATCH]`` or ``apply_patch <<'EOF'``)."""

_PACKAGES: Final = {
    **_each("mutating", """
        pip install, pip uninstall, pip download, pip wheel, uv add, uv remove,
        uv sync, uv lock, uv pip install, uv pip uninstall, uv pip sync, uv venv, poetry add,
        poetry install, poetry remove, poetry update, poetry lock, npm install, npm i, npm ci,
        npm uninstall, npm remove, npm rm, npm update, npm upgrade, npm add, npm link, npm publish,
        npm init, npm audit fix, pnpm install, pnpm i, pnpm add, pnpm remove, pnpm update,
        yarn add, yarn install, yarn remove, yarn upgrade, apt install, apt remove, apt purge,
        apt update, apt upgrade, apt autoremove, apt-get install, apt-get remove, apt-get purge,
        apt-get update, apt-get upgrade, apt-get dist-upgrade, apt-get autoremove, apk add,
        apk del, apk update, yum install, yum remove, dnf install, dnf remove, conda install,
        conda create, conda remove, conda update, conda env create, mamba install, brew install,
        brew uninstall, brew upgrade, brew update, gem install, bundle install, composer install,
        composer require, composer update, cargo install, cargo add, cargo remove, cargo new,
        cargo init, cargo fix, cargo update, go get, go install, go mod tidy, go mod init,
        go mod download, go generate, python setup.py install, python setup.py develop,
        docker rm, docker rmi, docker stop, docker kill, docker pull, docker push, docker tag,
        docker start, docker restart, docker compose down, docker compose up,
        docker compose restart, docker compose start, docker compose stop, docker compose rm,
        docker compose kill, docker compose pull, docker compose build, docker compose create,
        docker-compose down, docker-compose up, docker-compose restart, docker-compose start,
        docker-compose stop, docker-compose rm, docker-compose kill, docker-compose pull,
        docker-compose build, docker-compose create, supervisorctl restart, supervisorctl start,
        supervisorctl stop, kubectl apply, kubectl delete, kubectl create, kubectl patch,
        kubectl scale, kubectl edit, kubectl rollout, terraform apply, terraform destroy,
        terraform import
    """),
    **_each("read", """
        pip list, pip show, pip freeze, pip check, pip index, pip search, pip config list,
        npm ls, npm list, npm view, npm info, npm outdated,
        npm root, npm prefix, npm explain, npm why, npm config get, pnpm ls, pnpm list, yarn list,
        yarn info, yarn why, poetry show, uv pip list, uv pip show, uv pip freeze, uv tree,
        cargo fmt --check, ruff format --check, black --check, black --diff, isort --check-only,
        isort --diff
    """),
    **_each("default", """
        pip, npm, pnpm, yarn, uv, poetry, conda, brew, cargo, go, docker, docker-compose,
        kubectl, terraform, curl, make, pytest, python, node, ruby, php, java, bash, sh, zsh
    """),
}
"""Package managers and tool CLIs: installing changes the world, listing only looks."""

_GIT: Final = {
    **_each("read", """
        git status, git diff, git log, git show, git blame, git grep, git branch, git reflog,
        git ls-files, git ls-tree, git ls-remote, git cat-file, git rev-parse, git rev-list,
        git describe, git shortlog, git tag, git remote, git config --get, git config --list,
        git config -l, git stash list, git stash show, git worktree list, git submodule status,
        git merge-base, git name-rev, git check-ignore, git count-objects, git whatchanged,
        git help, git version, git apply --check, git apply --stat, git clean -n,
        git clean --dry-run
    """),
    **_each("mutating", """
        git add, git am, git apply, git checkout, git cherry-pick, git clean, git clone,
        git commit, git fetch, git init, git merge, git mv, git pull, git push, git rebase,
        git reset, git restore, git revert, git rm, git stash, git switch, git bisect,
        git format-patch, git gc, git prune, git update-index, git update-ref, git config,
        git worktree, git submodule, git notes, git branch -d, git branch -D, git branch -m,
        git branch -M, git branch --delete, git branch --move, git tag -a, git tag -d,
        git tag --delete, git remote add, git remote remove, git remote rm, git remote set-url,
        git remote rename
    """),
    "git": "default",
}
"""git: the history-reading subcommands look, the others change the repository."""

_POLLS: Final = _each("poll", """
    sleep, watch, wait, tail -f, tail -F, tail --follow, kubectl rollout status, kubectl wait,
    gh run watch, gh run list, gh run view, gh pr checks, gh pr status
""")
"""Waiting, then looking again: what a long job's poll loop runs (a rollout's or a CI run's
status until it is done)."""

DEFAULT_COMMAND_KINDS: Final[Mapping[str, str]] = MappingProxyType(
    {**_READS, **_WRITES, **_PACKAGES, **_GIT, **_POLLS})
"""The built-in command table: key (command word, subcommands, options) → kind.

Users extend or override it with the ``command_kinds`` setting; a command word not in it is
``default`` (running a program).
"""

WRAPPERS: Final = frozenset({"sudo", "doas", "env", "timeout", "nohup", "nice", "ionice", "time",
                             "command", "exec", "builtin", "stdbuf", "xargs", "unbuffer",
                             "caffeinate", "chronic"})
"""Words that run the command after them: the kind is that command's."""

WRAPPER_VALUE_OPTIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType({
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}),
    "nice": frozenset({"-n"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "xargs": frozenset({"-I", "-n", "-P", "-L", "-s", "-d", "-E", "-a", "--max-args",
                        "--max-procs", "--arg-file", "--delimiter"}),
    "env": frozenset({"-u", "-C", "--unset", "--chdir"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
})
"""Options of a wrapper that take the next word as their value."""

IGNORED_WORDS: Final = frozenset({"cd", "pushd", "popd", "export", "unset", "set", "shopt",
                                  "source", ".", "alias", "unalias", "true", "false", ":",
                                  "exit", "return", "local", "declare", "typeset", "readonly",
                                  "trap", "ulimit", "umask", "hash", "shift", "break",
                                  "continue", "done", "fi", "esac", "}", "]]"})
"""Shell builtins and closing keywords that neither read, change nor run anything."""

KEYWORDS: Final = frozenset({"!", "{", "then", "else", "do", "elif", "if", "while", "until"})
"""Words before the command of a segment (``if grep ...``, ``then rm ...``)."""

SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
"""Shells whose ``-c`` script is classified in place (one level deep)."""

MODULE_RUNNERS: Final = frozenset({"python", "pypy"})
"""Interpreters whose ``-m module`` runs the module as a command (``python -m pip install``)."""

PYTHON_FLAGS: Final = frozenset("bBdEiIOPqRsSuv")
"""Letters of the interpreter's own options that take no value (``python -u -m pytest``)."""

PYTHON_VALUE_OPTIONS: Final = frozenset({"-X", "-W"})
"""The interpreter's options before ``-m`` that take a value (``python -X dev -m pytest``)."""

RunnerOptions = tuple[frozenset[str], frozenset[str]]
"""(options without a value, options that take the next word or ``=value``) of a runner."""


def _options(flags: str, values: str = "") -> RunnerOptions:
    return frozenset(flags.split()), frozenset(values.split())


_NPM_EXEC: Final = _options("-y --yes --no -q --quiet --no-install --ignore-existing --offline "
                            "--prefer-offline --prefer-online --workspaces --ws "
                            "--include-workspace-root",
                            "-p --package -w --workspace")
_PNPM_EXEC: Final = _options("-r --recursive --parallel --no-bail -s --silent --bail",
                             "--package --resume-from --report-summary")
_UV_RUN: Final = _options(
    "--frozen --locked --no-sync --isolated --no-project --all-extras --no-dev --dev --active "
    "--no-active --exact --all-packages --no-env-file --offline --no-cache --refresh -q --quiet "
    "-v --verbose -n --no-config --script --gui-script --no-editable",
    "--with --with-requirements --with-editable --python -p --package --extra --group "
    "--only-group --no-group --directory --project --env-file --index --index-url "
    "--extra-index-url --default-index --from --cache-dir")
_POETRY: Final = _options("-q --quiet -v -vv -vvv --verbose -n --no-interaction --ansi "
                          "--no-ansi --no-plugins --no-cache",
                          "-C --directory -P --project")
_PIPX_RUN: Final = _options("--no-cache --pypi --path -q --quiet -v --verbose "
                            "--system-site-packages",
                            "--spec --python --pip-args -i --index-url --backend")

PACKAGE_RUNNERS: Final[Mapping[str, RunnerOptions]] = MappingProxyType({
    "npx": _NPM_EXEC, "npm exec": _NPM_EXEC, "npm x": _NPM_EXEC,
    "pnpm exec": _PNPM_EXEC, "pnpm dlx": _PNPM_EXEC, "pnpx": _PNPM_EXEC,
    "bunx": _options("--bun --silent --verbose --no-install", "-p --package"),
    "bun x": _options("--bun --silent --verbose --no-install", "-p --package"),
    "yarn exec": _options(""), "yarn dlx": _options("-q --quiet", "-p --package"),
    "uvx": _UV_RUN, "uv tool run": _UV_RUN,
    "uv run": (_UV_RUN[0] | {"-m", "--module"}, _UV_RUN[1]),  # uv run -m pytest: pytest
    "poetry run": _POETRY,
    "pipx run": _PIPX_RUN,
})
"""Package runners (command word and subcommands) → their options; what follows is the command.

``npx prettier --write .`` runs ``prettier --write .``, ``uv run -m pytest`` runs ``pytest``.
After the options, ``--`` may come before the command (``npm exec -- prettier``); the command's
version is dropped (``npx prettier@3``, ``uvx ruff@0.6``). An option not listed here (whose value
is unknown: ``npx -c 'cmd'``) leaves the line the runner's own, as before.
"""

SCRIPT_RUNNERS: Final = frozenset({"yarn", "yarn run", "pnpm"})
"""Runners of a package script or a program of the same name (``yarn prettier --write .``).

The word after them is read as a command only where the table has a rule for it with a
subcommand or an option (``prettier --write``, ``eslint --fix``): ``yarn test`` runs the
package's ``test`` script, not the ``test`` builtin.
"""

RUNNER_GLOBAL_OPTIONS: Final[Mapping[str, RunnerOptions]] = MappingProxyType({
    "pnpm": _options("-r --recursive -w --workspace-root -s --silent --parallel --stream "
                     "--aggregate-output --if-present --no-bail",
                     "-F --filter -C --dir --workspace-concurrency --reporter --loglevel"),
    "npm": _options("-q --quiet -s --silent --workspaces --ws --include-workspace-root",
                    "-w --workspace --prefix --loglevel"),
    "yarn": _options("-s --silent", "--cwd"),
    "poetry": _POETRY,
    "uv": _options("-q --quiet -v --verbose --offline --no-cache --no-config -n",
                   "--directory --project --cache-dir --config-file"),
})
"""Options of a runner's program before its subcommand (``pnpm --filter web exec``)."""
