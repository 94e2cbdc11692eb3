"""The command frame: options as Apache commons-cli declares them (``-t/--topic``), its parser and help layout, the
global ``-n``/``-h``, ACL credentials, and the exit rules.

Exit codes: 0 done; 1 a usage error (unknown command or option, missing required option, bad value: the reason on
stderr, then the usage); 2 the cluster refused or could not be reached (the reason on stderr, naming the request
code when the peer does not serve it). RocketMQ's mqadmin prints a stack trace and exits 0 on a failure; scripts
here can test the status instead."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from broker_core.client import AdminClient, ClientError, SessionCredentials
from broker_core.protocol import RequestCode, ResponseCode
from broker_core.tools.mqadmin.fmt import jfmt

NAMESRV_HELP = "Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'"


class UsageError(Exception):
    """A command line mqadmin cannot run: exit 1 with the usage."""


class CommandFailed(Exception):
    """The cluster answered no, or could not be reached: exit 2."""


@dataclass(frozen=True)
class Opt:
    short: str
    long: str
    has_arg: bool
    desc: str
    required: bool = False


@dataclass
class Command:
    name: str
    desc: str
    options: list[Opt]
    run: Callable[[Context], None]
    group: tuple[str, ...] = ()  # short names of which exactly one is required (commons-cli OptionGroup)

    def all_options(self) -> list[Opt]:
        base = [Opt("h", "help", False, "Print help"), Opt("n", "namesrvAddr", True, NAMESRV_HELP)]
        mine = {o.short for o in self.options}
        return sorted([o for o in base if o.short not in mine] + self.options, key=lambda o: o.short.lower())


COMMANDS: dict[str, Command] = {}


def command(name: str, desc: str, options: list[Opt], group: tuple[str, ...] = ()) -> Callable[
        [Callable[[Context], None]], Callable[[Context], None]]:
    def register(fn: Callable[[Context], None]) -> Callable[[Context], None]:
        COMMANDS[name] = Command(name, desc, options, fn, group)
        return fn
    return register


@dataclass
class Context:
    """One run: the parsed options, the output stream, an admin client made on first use."""

    cmd: Command
    values: dict[str, str | bool]
    out: IO[str]
    credentials: SessionCredentials | None = None
    err: IO[str] = field(default=sys.stderr, repr=False)
    _admin: AdminClient | None = field(default=None, repr=False)

    def has(self, short: str) -> bool:
        return short in self.values

    def get(self, short: str, default: str | None = None) -> str | None:
        v = self.values.get(short)
        return v.strip() if isinstance(v, str) else default

    def req(self, short: str) -> str:
        v = self.get(short)
        if v is None:
            raise UsageError(f"missing required option: {self._name(short)}")
        return v

    def num(self, short: str, default: int) -> int:
        v = self.get(short)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            raise UsageError(f"option {self._name(short)} needs a number, not {v!r}") from None

    def truth(self, short: str, default: bool) -> bool:
        """Java's ``Boolean.parseBoolean``: "true" in any case is true, anything else false."""
        v = self.get(short)
        return default if v is None else v.lower() == "true"

    def _name(self, short: str) -> str:
        o = next((o for o in self.cmd.all_options() if o.short == short), None)
        return f"-{short}/--{o.long}" if o else f"-{short}"

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            namesrv = self.get("n") or os.environ.get("NAMESRV_ADDR", "").strip()
            if not namesrv:
                raise UsageError("no name server address: give -n/--namesrvAddr or set NAMESRV_ADDR")
            self._admin = AdminClient(namesrv, credentials=self.credentials).start()
        return self._admin

    def print(self, fmt: str, *args: Any) -> None:
        """``System.out.printf`` with a Java format string (``%n`` ends a line; ``%-20s``, ``%d``, ``%.2f``)."""
        self.out.write(fmt.replace("%n", "\n") % args if args else fmt.replace("%n", "\n").replace("%%", "%"))

    def warn(self, text: str) -> None:
        """A note on stderr that does not fail the command (RocketMQ prints a stack trace there)."""
        self.err.write(f"mqadmin {self.cmd.name}: {text}\n")

    def close(self) -> None:
        if self._admin is not None:
            self._admin.shutdown()


# ---------------------------------------------------------------------- parsing and help
def parse(cmd: Command, argv: list[str]) -> dict[str, str | bool]:
    """commons-cli's DefaultParser, enough of it: ``-t X``, ``-tX``, ``--topic X``, ``--topic=X``, flags."""
    by_short = {o.short: o for o in cmd.all_options()}
    by_long = {o.long.strip(): o for o in cmd.all_options()}
    values: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        inline: str | None = None
        if arg.startswith("--"):
            name, eq, rest = arg[2:].partition("=")
            opt = by_long.get(name)
            inline = rest if eq else None
        elif arg.startswith("-") and len(arg) > 1:
            opt = by_short.get(arg[1:])  # a short name of more letters (electMaster's -bn)
            if opt is None:
                opt = by_short.get(arg[1])
                inline = arg[2:] or None
            if opt is None:
                opt = by_long.get(arg[1:])
                inline = None
        else:
            raise UsageError(f"unexpected argument: {arg}")
        if opt is None:
            raise UsageError(f"Unrecognized option: {arg}")
        if opt.has_arg:
            if inline is None:
                i += 1
                if i >= len(argv):
                    raise UsageError(f"Missing argument for option: {opt.short}")
                inline = argv[i]
            values[opt.short] = inline
        elif inline is not None and arg.startswith("--"):
            raise UsageError(f"option --{opt.long.strip()} takes no value")
        else:
            values[opt.short] = True
        i += 1
    return values


def check_required(cmd: Command, values: dict[str, str | bool]) -> None:
    missing = [o for o in cmd.options if o.required and o.short not in values]
    if missing:
        raise UsageError("Missing required option" + ("s" if len(missing) > 1 else "") + ": "
                         + ", ".join(f"-{o.short}/--{o.long.strip()}" for o in missing))
    if cmd.group:
        given = [s for s in cmd.group if s in values]
        if len(given) != 1:
            names = " or ".join(f"-{s}" for s in cmd.group)
            raise UsageError(f"give exactly one of {names}" + (f" (got {', '.join('-' + g for g in given)})"
                                                               if given else ""))


def usage(cmd: Command) -> str:
    """The layout of commons-cli ``HelpFormatter.printHelp("mqadmin <cmd>", options, true)``."""
    opts = cmd.all_options()
    parts: list[str] = []
    grouped = [o for o in opts if o.short in cmd.group]
    for o in opts:
        if o.short in cmd.group:
            if o is grouped[0]:
                parts.append("[" + " | ".join(_usage_item(g) for g in grouped) + "]")
            continue
        item = _usage_item(o)
        parts.append(item if o.required else f"[{item}]")
    first = f"usage: mqadmin {cmd.name}"
    lines, line = [], first
    for part in parts:  # an option and its <arg> stay on one line
        if len(line) + 1 + len(part) > 74 and line.strip():
            lines.append(line)
            line = " " * len(first)
        line += " " + part
    text = "\n".join([*lines, line]) + "\n"
    left = [f" -{o.short},--{o.long.strip()}" + (" <arg>" if o.has_arg else "") for o in opts]
    width = max(len(s) for s in left) + 3
    for lhs, o in zip(left, opts, strict=True):
        desc = textwrap.wrap(o.desc, width=max(74 - width, 20)) or [""]
        text += lhs.ljust(width) + desc[0] + "\n" + "".join(" " * width + d + "\n" for d in desc[1:])
    return text


def _usage_item(o: Opt) -> str:
    return f"-{o.short}" + (" <arg>" if o.has_arg else "")


def command_list() -> str:
    text = "The most commonly used mqadmin commands are:\n"
    text += "".join(jfmt("   %-20s %s%n", c.name, c.desc) for c in COMMANDS.values())
    return text + "\nSee 'mqadmin help <command>' for more information on a specific command.\n"


# ---------------------------------------------------------------------- credentials and errors
def credentials_from(env: dict[str, str], access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    """Flags first, then ROCKETMQ_ACCESS_KEY/ROCKETMQ_SECRET_KEY, then ``$ROCKETMQ_HOME/conf/tools.yml``
    (``accessKey: ..`` / ``secretKey: ..``, as RocketMQ's mqadmin reads it)."""
    ak = access_key or env.get("ROCKETMQ_ACCESS_KEY")
    sk = secret_key or env.get("ROCKETMQ_SECRET_KEY")
    home = env.get("ROCKETMQ_HOME")
    if not (ak and sk) and home and (Path(home) / "conf" / "tools.yml").is_file():
        found = {}
        for line in (Path(home) / "conf" / "tools.yml").read_text().splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() in ("accessKey", "secretKey"):
                found[key.strip()] = value.strip().strip("'\"")
        ak, sk = ak or found.get("accessKey"), sk or found.get("secretKey")
    if ak and sk:
        return SessionCredentials(ak, sk)
    if ak or sk:
        raise UsageError("ACL credentials need both an access key and a secret key")
    return None


def describe(exc: ClientError) -> str:
    """A refusal in words; a code the peer does not serve is named."""
    if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return f"the peer does not support this request ({exc})"
    return str(exc)


def unsupported(what: str, code: RequestCode, addr: str) -> CommandFailed:
    return CommandFailed(f"the broker at {addr} does not support {what} (request code {int(code)} {code.name})")


def main(argv: list[str] | None = None, out: IO[str] | None = None, err: IO[str] | None = None,
         env: dict[str, str] | None = None) -> int:
    from broker_core.tools.mqadmin import commands  # noqa: F401  (registers every command)

    argv = list(sys.argv[1:] if argv is None else argv)
    out, err = out or sys.stdout, err or sys.stderr
    env = dict(os.environ if env is None else env)
    access_key = secret_key = None
    rest: list[str] = []
    i = 0
    while i < len(argv):  # global ACL flags, anywhere on the line (long names no sub-command uses)
        if argv[i] in ("--access-key", "--secret-key") and i + 1 < len(argv):
            if argv[i] == "--access-key":
                access_key = argv[i + 1]
            else:
                secret_key = argv[i + 1]
            i += 2
            continue
        rest.append(argv[i])
        i += 1
    if not rest or rest[0] in ("-h", "--help"):
        out.write(command_list())
        return 0
    if rest[0] == "help":
        if len(rest) < 2:
            out.write(command_list())
            return 0
        target = COMMANDS.get(rest[1])
        if target is None:
            err.write(f"The sub command {rest[1]} not exist.\n")
            return 1
        out.write(usage(target))
        return 0
    cmd = COMMANDS.get(rest[0])
    if cmd is None:
        err.write(f"The sub command {rest[0]} not exist.\n")
        out.write(command_list())
        return 1
    ctx: Context | None = None
    try:
        values = parse(cmd, rest[1:])
        if "h" in values and not any(o.short == "h" for o in cmd.options):
            out.write(usage(cmd))
            return 0
        check_required(cmd, values)
        if "n" in values:
            env["NAMESRV_ADDR"] = str(values["n"])
        ctx = Context(cmd, values, out, credentials_from(env, access_key, secret_key), err)
        if "n" not in values and env.get("NAMESRV_ADDR"):
            ctx.values["n"] = env["NAMESRV_ADDR"]
        cmd.run(ctx)
        out.flush()
        return 0
    except UsageError as exc:
        err.write(f"mqadmin {cmd.name}: {exc}\n")
        err.write(usage(cmd))
        return 1
    except CommandFailed as exc:
        err.write(f"mqadmin {cmd.name}: {exc}\n")
        return 2
    except ClientError as exc:
        err.write(f"mqadmin {cmd.name}: {describe(exc)}\n")
        return 2
    except (ConnectionError, TimeoutError, OSError) as exc:
        err.write(f"mqadmin {cmd.name}: {type(exc).__name__}: {exc}\n")
        return 2
    finally:
        if ctx is not None:
            ctx.close()
