"""Older public names kept working: keyword arguments and attributes that were renamed.

`renamed_keyword` resolves a keyword that has a new name and an older one (giving both is an
TypeError naming them, as Python does for an argument given twice); `alias_property` makes an attribute readable and writable under its older
name.  Both exist so a rename never breaks user code and every rename behaves the same.
`deprecated_keyword` and `add_renamed_flag` do the same for names on their way out (the scene builders'
and the demos' `sigma`, now `edge_softness`): the old name still works and warns (DeprecationWarning
from Python, FutureWarning on a command line, which Python shows by default).
"""
import argparse
import warnings

_UNSET = object()


def renamed_keyword(new_name, new_value, old_name, old_value, default=None, owner=None):
    """The value of keyword `new_name`, given either as `new_value` or under its older name
    (`old_value`); `default` when neither is given (None counts as not given).  Returns
    (value, the name it came under) so validation errors can name what the caller wrote."""
    if new_value is not None and old_value is not None:
        where = f"{owner}: " if owner else ""
        raise TypeError(f"{where}{new_name} and {old_name}: give one ({old_name} is the older name of {new_name}), "
                         f"got {new_name}={new_value!r} and {old_name}={old_value!r}")
    if old_value is not None:
        return old_value, old_name
    return (new_value if new_value is not None else default), new_name


def alias_property(new_name, doc=None):
    """A property that reads and writes attribute `new_name` (put it in a class under the older name)."""
    def get(self):
        return getattr(self, new_name)

    def set_(self, value):
        setattr(self, new_name, value)

    return property(get, set_, doc=doc or f"The older name of `{new_name}`.")


def deprecated_keyword(new_name, new_value, old_name, old_value, default=None, owner=None):
    """`renamed_keyword`, warning (DeprecationWarning, at the caller's caller) when the old name is used."""
    value, name = renamed_keyword(new_name, new_value, old_name, old_value, default, owner)
    if name == old_name:
        where = f"{owner}: " if owner else ""
        warnings.warn(f"{where}{old_name}= is deprecated: use {new_name}= (the same value)", DeprecationWarning,
                      stacklevel=3)
    return value


class _RenamedFlag(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        # attributed to the program, not to argparse's internals
        warnings.warn_explicit(f"{option_string} is deprecated: use {self.metavar} (the same value)", FutureWarning,
                               filename=parser.prog, lineno=0)
        setattr(namespace, self.dest, values)


def add_renamed_flag(parser, old_flag, new_flag, dest, **kwargs):
    """Accept `old_flag` (e.g. "--sigma") as a hidden, deprecated spelling of `new_flag`, storing into `dest`
    (`kwargs`: type / nargs as `new_flag`'s)."""
    parser.add_argument(old_flag, dest=dest, action=_RenamedFlag, metavar=new_flag, help=argparse.SUPPRESS,
                        default=argparse.SUPPRESS, **kwargs)
