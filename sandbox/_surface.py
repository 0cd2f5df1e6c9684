"""The audited script surface: every name a script can reach, each with why it is safe.

A script reaches objects in three ways: the names of its globals (the script API of API.md), the
builtins, and the attributes of the objects those give it (module proxies, the values their
functions return, the script's own objects). :data:`SURFACE` lists every one, in rows of
``(owner, names, reason)``:

- owner ``"script"``: the script's globals; ``"builtins"``: the builtins;
- a module's name (``"json"``): the names its proxy exposes to ``import json``;
- a class, as ``"<module>.<qualname>"`` (``"builtins.str"``, ``"re.Pattern"``): the attributes
  defined on that class (methods, descriptors, constants) or set on its instances, reached
  through any object whose lookup finds them there.

The language layer enforces the table, so anything missing from it is denied: the builtins and
each module proxy are built from it, and :func:`sandbox._guards.guarded_getattr` returns an
attribute only when the class that defines it (or, for an instance attribute, the object's
class) is listed with that name, or is a class the script defined itself. The test
``tests/sandbox/test_sandbox_surface.py`` walks what a script can reach at run time, from its
globals, builtins, proxies and the objects their functions return, and fails on any name not
in this table and on any row that nothing reaches.

Left out on purpose, as ways out of the language layer or into trusted objects:

- ``functools.update_wrapper`` and the real ``functools.wraps`` (it reads and writes the
  attributes its caller names, ``__globals__`` and ``__code__`` included, with the real
  ``getattr``/``setattr``; its result is a ``partial`` whose ``func`` is ``update_wrapper``);
  the real ``functools.total_ordering`` (sets attributes on whatever class it is given); and
  ``functools.cached_property`` (its ``attrname`` is writable and says where ``__get__``
  writes). ``wraps``, ``total_ordering`` and ``namedtuple`` are the sandbox's own versions
  (:mod:`sandbox._guards`), which act only on functions and classes the script defined.
- ``AttributeError.obj`` (the object a failed lookup was made on; raised inside trusted code,
  a trusted object).
- Python methods and properties read off a class the script didn't write (the names below
  are read off instances, where they are bound): unbound, ``collections.Counter.copy(int)``
  runs ``int.__class__(int)`` and hands out the real ``type``, and a property hands out its
  getter. ``type`` and every other metaclass are denied as values wherever they are found
  (``tests/security`` attacks each).
- Everything whose name starts with ``_``, the frame, code, generator and traceback internals,
  ``str.format``/``format_map``, ``ABCMeta.register`` and the other class-level methods of
  metaclasses, and every builtin not listed (``type``, ``getattr``, ``vars``, ``open`` ...).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, NamedTuple

__all__ = ["SURFACE", "Row", "allowed_pairs", "names_of"]


class Row(NamedTuple):
    """Names of one owner a script may reach, and the one reason they are all safe."""

    owner: str
    names: str
    reason: str

    def split(self) -> Iterator[tuple[str, str]]:
        """The row's (owner, name) pairs."""
        for name in self.names.split():
            yield self.owner, name


SURFACE: Final[tuple[Row, ...]] = (
    # ---------------------------------------------------------------- the script's globals
    Row(
        "script",
        "call_tool call_tools tools fetch read_text read_bytes write_text inputs ToolError "
        "Unfetchable",
        "the script API: each converts its arguments to exact builtin types before trusted code "
        "reads them; tools.<name> are the run's tool callers, and tools.search and "
        "tools.describe ask the host for stubs of the run's own tools (exact str in, plain data "
        "out); inputs is the run's own copy",
    ),
    # ---------------------------------------------------------------- builtins
    Row("builtins", "None False True Ellipsis NotImplemented", "constants"),
    Row(
        "builtins",
        "bool bytearray bytes complex dict float frozenset int list range set slice str tuple",
        "constructors of plain values; every method they have is listed under its class below",
    ),
    Row(
        "builtins",
        "property staticmethod classmethod",
        "descriptors the script builds for its own classes",
    ),
    Row(
        "builtins",
        "abs all any ascii bin callable chr divmod enumerate filter hash hex id isinstance "
        "issubclass iter len map max min next oct ord pow repr reversed round sorted sum zip",
        "functions of their arguments; callbacks they make are the script's own callables",
    ),
    Row("builtins", "print", "the sandbox's print: output goes to the host, capped"),
    Row(
        "builtins",
        "ArithmeticError AssertionError AttributeError Exception FileExistsError "
        "FileNotFoundError FloatingPointError ImportError IndexError IsADirectoryError KeyError "
        "LookupError MemoryError NameError NotADirectoryError NotImplementedError OSError "
        "OverflowError PermissionError RecursionError RuntimeError StopIteration TimeoutError "
        "TypeError UnicodeDecodeError UnicodeEncodeError UnicodeError ValueError "
        "ZeroDivisionError",
        "exception classes a script may raise or catch",
    ),
    # ---------------------------------------------------------------- modules and classes
    Row(
        "_blake2.blake2b",
        "MAX_DIGEST_SIZE MAX_KEY_SIZE PERSON_SIZE SALT_SIZE block_size copy digest digest_size "
        "hexdigest name update",
        "a hash object: it reads only the bytes it is fed",
    ),
    Row(
        "_blake2.blake2s",
        "MAX_DIGEST_SIZE MAX_KEY_SIZE PERSON_SIZE SALT_SIZE block_size copy digest digest_size "
        "hexdigest name update",
        "a hash object: it reads only the bytes it is fed",
    ),
    Row(
        "_hashlib.HASH",
        "block_size copy digest digest_size hexdigest name update",
        "a hash object: it reads only the bytes it is fed",
    ),
    Row(
        "_hashlib.HASHXOF",
        "digest digest_size hexdigest",
        "a hash object: it reads only the bytes it is fed",
    ),
    Row(
        "_random.Random",
        "getrandbits random",
        "the C core of random.Random: numbers from its own state",
    ),
    Row(
        "_sre.SRE_Scanner",
        "match pattern search",
        "steps a compiled pattern over a string; gives match objects",
    ),
    Row(
        "base64",
        "a85decode a85encode b16decode b16encode b32decode b32encode b32hexdecode b32hexencode "
        "b64decode b64encode b85decode b85encode standard_b64decode standard_b64encode "
        "urlsafe_b64decode urlsafe_b64encode",
        "pure bytes-to-bytes codecs (binascii underneath)",
    ),
    Row(
        "bisect",
        "bisect bisect_left bisect_right insort insort_left insort_right",
        "C searches and inserts on the list it is given, by <",
    ),
    Row(
        "builtins.AttributeError",
        "name",
        "the failed name (obj, the object looked up, is left out: it may be a trusted one)",
    ),
    Row(
        "builtins.BaseException",
        "add_note args with_traceback",
        "an exception's own arguments and notes; with_traceback only attaches one",
    ),
    Row(
        "builtins.ImportError",
        "msg name path",
        "the name that failed to import, as text",
    ),
    Row(
        "builtins.NameError",
        "name",
        "the name that was not found, as text",
    ),
    Row(
        "builtins.OSError",
        "characters_written errno filename filename2 strerror",
        "numbers and text describing the error",
    ),
    Row(
        "builtins.StopIteration",
        "value",
        "the value a generator returned",
    ),
    Row(
        "builtins.UnicodeDecodeError",
        "encoding end object reason start",
        "the bytes, positions and reason of a decoding error",
    ),
    Row(
        "builtins.UnicodeEncodeError",
        "encoding end object reason start",
        "the text, positions and reason of an encoding error",
    ),
    Row(
        "builtins.bytearray",
        "append capitalize center clear copy count decode endswith expandtabs extend find fromhex "
        "hex index insert isalnum isalpha isascii isdigit islower isspace istitle isupper join "
        "ljust lower lstrip maketrans partition pop remove removeprefix removesuffix replace "
        "reverse rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip "
        "swapcase title translate upper zfill",
        "methods of a mutable byte buffer: they read and change only self",
    ),
    Row(
        "builtins.bytes",
        "capitalize center count decode endswith expandtabs find fromhex hex index isalnum "
        "isalpha isascii isdigit islower isspace istitle isupper join ljust lower lstrip "
        "maketrans partition removeprefix removesuffix replace rfind rindex rjust rpartition "
        "rsplit rstrip split splitlines startswith strip swapcase title translate upper zfill",
        "methods of an immutable value: they read only self and their arguments",
    ),
    Row(
        "builtins.complex",
        "conjugate imag real",
        "parts of a number",
    ),
    Row(
        "builtins.dict",
        "clear copy fromkeys get items keys pop popitem setdefault update values",
        "methods of a dict: they read and change only self",
    ),
    Row(
        "builtins.dict_items",
        "isdisjoint mapping",
        "a view of the script's own dict; mapping is a read-only proxy of it",
    ),
    Row(
        "builtins.dict_keys",
        "isdisjoint mapping",
        "a view of the script's own dict; mapping is a read-only proxy of it",
    ),
    Row(
        "builtins.dict_values",
        "mapping",
        "a view of the script's own dict; mapping is a read-only proxy of it",
    ),
    Row(
        "builtins.float",
        "as_integer_ratio conjugate fromhex hex imag is_integer real",
        "parts and conversions of a number",
    ),
    Row(
        "builtins.frozenset",
        "copy difference intersection isdisjoint issubset issuperset symmetric_difference union",
        "methods of an immutable set: they read only self and their arguments",
    ),
    Row(
        "builtins.generator",
        "close gi_running gi_suspended send throw",
        "drive or close a generator; gi_running, gi_suspended are flags (no frame, no code)",
    ),
    Row(
        "builtins.int",
        "as_integer_ratio bit_count bit_length conjugate denominator from_bytes imag numerator "
        "real to_bytes",
        "parts and conversions of a number",
    ),
    Row(
        "builtins.list",
        "append clear copy count extend index insert pop remove reverse sort",
        "methods of a list: they read and change only self",
    ),
    Row(
        "builtins.mappingproxy",
        "copy get items keys values",
        "a read-only view of a mapping the script already holds",
    ),
    Row(
        "builtins.property",
        "deleter fdel fget fset getter setter",
        "the functions a property was built from, and copies of it",
    ),
    Row(
        "builtins.range",
        "count index start step stop",
        "the bounds of a range",
    ),
    Row(
        "builtins.set",
        "add clear copy difference difference_update discard intersection intersection_update "
        "isdisjoint issubset issuperset pop remove symmetric_difference "
        "symmetric_difference_update union update",
        "methods of a set: they read and change only self",
    ),
    Row(
        "builtins.slice",
        "indices start step stop",
        "the bounds of a slice",
    ),
    Row(
        "builtins.str",
        "capitalize casefold center count encode endswith expandtabs find index isalnum isalpha "
        "isascii isdecimal isdigit isidentifier islower isnumeric isprintable isspace istitle "
        "isupper join ljust lower lstrip maketrans partition removeprefix removesuffix replace "
        "rfind rindex rjust rpartition rsplit rstrip split splitlines startswith strip swapcase "
        "title translate upper zfill",
        "methods of an immutable value (format and format_map are denied)",
    ),
    Row(
        "builtins.tuple",
        "count index",
        "methods of an immutable value",
    ),
    Row(
        "collections",
        "ChainMap Counter OrderedDict defaultdict deque namedtuple",
        "container types; namedtuple validates every field name as an identifier",
    ),
    Row(
        "collections.ChainMap",
        "clear copy fromkeys get maps new_child parents pop popitem",
        "a list of the script's own mappings, searched in order",
    ),
    Row(
        "collections.Counter",
        "copy elements fromkeys most_common subtract total update",
        "dict methods that count; they read and change only self",
    ),
    Row(
        "collections.OrderedDict",
        "clear copy fromkeys items keys move_to_end pop popitem setdefault update values",
        "dict methods that keep order; they read and change only self",
    ),
    Row(
        "collections.abc.Mapping",
        "get items keys values",
        "the mixin methods mappings inherit: item reads of self",
    ),
    Row(
        "collections.abc.MutableMapping",
        "clear pop popitem setdefault update",
        "the mixin methods mappings inherit: item writes of self",
    ),
    Row(
        "collections.defaultdict",
        "copy default_factory",
        "a dict with a factory the script chose",
    ),
    Row(
        "collections.deque",
        "append appendleft clear copy count extend extendleft index insert maxlen pop popleft "
        "remove reverse rotate",
        "methods of a double-ended queue: they read and change only self",
    ),
    Row(
        "datetime",
        "MAXYEAR MINYEAR UTC date datetime time timedelta timezone tzinfo",
        "C date and time types and constants",
    ),
    Row(
        "datetime.date",
        "ctime day fromisocalendar fromisoformat fromordinal fromtimestamp isocalendar isoformat "
        "isoweekday max min month replace resolution strftime timetuple today toordinal weekday "
        "year",
        "C date arithmetic and formatting",
    ),
    Row(
        "datetime.datetime",
        "astimezone combine ctime date dst fold fromisoformat fromtimestamp hour isoformat max "
        "microsecond min minute now replace resolution second strptime time timestamp timetuple "
        "timetz tzinfo tzname utcfromtimestamp utcnow utcoffset utctimetuple",
        "C date arithmetic and formatting; strptime imports only _strptime",
    ),
    Row(
        "datetime.time",
        "dst fold fromisoformat hour isoformat max microsecond min minute replace resolution "
        "second strftime tzinfo tzname utcoffset",
        "C time-of-day arithmetic and formatting",
    ),
    Row(
        "datetime.timedelta",
        "days max microseconds min resolution seconds total_seconds",
        "parts of a duration",
    ),
    Row(
        "datetime.timezone",
        "dst fromutc max min tzname utc utcoffset",
        "a fixed UTC offset",
    ),
    Row(
        "datetime.tzinfo",
        "dst fromutc tzname utcoffset",
        "the interface a script's own time zone class implements",
    ),
    Row(
        "decimal",
        "BasicContext Clamped Context ConversionSyntax Decimal DecimalException DecimalTuple "
        "DefaultContext DivisionByZero DivisionImpossible DivisionUndefined ExtendedContext "
        "FloatOperation Inexact InvalidContext InvalidOperation MAX_EMAX MAX_PREC MIN_EMIN "
        "MIN_ETINY Overflow ROUND_05UP ROUND_CEILING ROUND_DOWN ROUND_FLOOR ROUND_HALF_DOWN "
        "ROUND_HALF_EVEN ROUND_HALF_UP ROUND_UP Rounded Subnormal Underflow getcontext "
        "localcontext setcontext",
        "C decimal types, contexts, signals and constants (_decimal)",
    ),
    Row(
        "decimal.Context",
        "Emax Emin Etiny Etop abs add canonical capitals clamp clear_flags clear_traps compare "
        "compare_signal compare_total compare_total_mag copy copy_abs copy_decimal copy_negate "
        "copy_sign create_decimal create_decimal_from_float divide divide_int divmod exp fma "
        "is_canonical is_finite is_infinite is_nan is_normal is_qnan is_signed is_snan "
        "is_subnormal is_zero ln log10 logb logical_and logical_invert logical_or logical_xor max "
        "max_mag min min_mag minus multiply next_minus next_plus next_toward normalize "
        "number_class plus power prec quantize radix remainder remainder_near rotate rounding "
        "same_quantum scaleb shift sqrt subtract to_eng_string to_integral to_integral_exact "
        "to_integral_value to_sci_string flags traps",
        "a decimal context's precision, flags and arithmetic (C, _decimal)",
    ),
    Row(
        "decimal.Decimal",
        "adjusted as_integer_ratio as_tuple canonical compare compare_signal compare_total "
        "compare_total_mag conjugate copy_abs copy_negate copy_sign exp fma from_float imag "
        "is_canonical is_finite is_infinite is_nan is_normal is_qnan is_signed is_snan "
        "is_subnormal is_zero ln log10 logb logical_and logical_invert logical_or logical_xor max "
        "max_mag min min_mag next_minus next_plus next_toward normalize number_class quantize "
        "radix real remainder_near rotate same_quantum scaleb shift sqrt to_eng_string "
        "to_integral to_integral_exact to_integral_value",
        "C decimal arithmetic on immutable values",
    ),
    Row(
        "decimal.DecimalTuple",
        "digits exponent sign",
        "the fields of a decimal's as_tuple()",
    ),
    Row(
        "decimal.SignalDictMixin",
        "copy",
        "the flags or traps of a context, by signal class",
    ),
    Row(
        "difflib",
        "Differ HtmlDiff IS_CHARACTER_JUNK IS_LINE_JUNK SequenceMatcher context_diff diff_bytes "
        "get_close_matches ndiff restore unified_diff",
        "sequence comparison over what the script passes",
    ),
    Row(
        "difflib.Differ",
        "charjunk compare linejunk",
        "compares two lists of lines with the junk functions it was given",
    ),
    Row(
        "difflib.HtmlDiff",
        "make_file make_table",
        "renders a comparison as HTML text",
    ),
    Row(
        "difflib.Match",
        "a b size",
        "the fields of a matching block",
    ),
    Row(
        "difflib.SequenceMatcher",
        "a autojunk b b2j bjunk bpopular find_longest_match fullbcount get_grouped_opcodes "
        "get_matching_blocks get_opcodes isjunk matching_blocks opcodes quick_ratio ratio "
        "real_quick_ratio set_seq1 set_seq2 set_seqs",
        "compares two sequences the script gave it; its state is plain data",
    ),
    Row(
        "enum.Enum",
        "name value",
        "the name and value of an re flag",
    ),
    Row(
        "fractions",
        "Fraction",
        "the rational number type",
    ),
    Row(
        "fractions.Fraction",
        "as_integer_ratio denominator from_decimal from_float limit_denominator numerator",
        "rational arithmetic on immutable values",
    ),
    Row(
        "functools",
        "cache cmp_to_key lru_cache partial reduce total_ordering wraps",
        "higher-order helpers; wraps and total_ordering are the sandbox's (script objects only)",
    ),
    Row(
        "functools.CacheInfo",
        "currsize hits maxsize misses",
        "the counts of an lru_cache",
    ),
    Row(
        "functools.KeyWrapper",
        "obj",
        "the value a cmp_to_key key wraps",
    ),
    Row(
        "functools._lru_cache_wrapper",
        "cache_clear cache_info cache_parameters",
        "a memoizing wrapper of the script's callable: its counts and clear",
    ),
    Row(
        "functools.partial",
        "args func keywords",
        "the callable and arguments the script bound",
    ),
    Row(
        "hashlib",
        "algorithms_available algorithms_guaranteed blake2b blake2s md5 new pbkdf2_hmac sha1 "
        "sha224 sha256 sha384 sha3_224 sha3_256 sha3_384 sha3_512 sha512 shake_128 shake_256",
        "hash constructors chosen from a fixed table by name; pbkdf2_hmac is C",
    ),
    Row(
        "heapq",
        "heapify heappop heappush heappushpop heapreplace merge nlargest nsmallest",
        "C heap operations on the list given, by <",
    ),
    Row(
        "itertools",
        "accumulate chain combinations combinations_with_replacement compress count cycle "
        "dropwhile filterfalse groupby islice pairwise permutations product repeat starmap "
        "takewhile tee zip_longest",
        "C iterator building blocks over what the script passes",
    ),
    Row(
        "itertools.chain",
        "from_iterable",
        "chains the iterables of one iterable",
    ),
    Row(
        "json",
        "JSONDecodeError dumps loads",
        "encode and decode plain data; callbacks the script passes get plain data",
    ),
    Row(
        "json.decoder.JSONDecodeError",
        "colno doc lineno msg pos",
        "where and why a JSON text failed to parse",
    ),
    Row(
        "math",
        "acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e "
        "erf erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot inf isclose "
        "isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nan nextafter perm "
        "pi pow prod radians remainder sin sinh sqrt tan tanh tau trunc ulp",
        "C functions of numbers",
    ),
    Row(
        "numbers.Real",
        "conjugate imag real",
        "parts of a real number (Fraction inherits them)",
    ),
    Row(
        "random",
        "Random SystemRandom betavariate choice choices expovariate gammavariate gauss "
        "getrandbits lognormvariate normalvariate paretovariate randbytes randint random "
        "randrange sample seed shuffle triangular uniform vonmisesvariate weibullvariate",
        "the module's shared Random: numbers from its own state",
    ),
    Row(
        "random.Random",
        "VERSION betavariate choice choices expovariate gammavariate gauss gauss_next getstate "
        "lognormvariate normalvariate paretovariate randbytes randint randrange sample seed "
        "setstate shuffle triangular uniform vonmisesvariate weibullvariate",
        "random numbers from its own state; seed and setstate change only that state",
    ),
    Row(
        "random.SystemRandom",
        "gauss_next getrandbits getstate randbytes random seed setstate",
        "random numbers from the kernel (getrandom); no state to read",
    ),
    Row(
        "re",
        "A ASCII DOTALL I IGNORECASE M MULTILINE NOFLAG S U UNICODE VERBOSE X compile error "
        "escape findall finditer fullmatch match search split sub subn",
        "compile and apply regular expressions; flags are int constants",
    ),
    Row(
        "re.Match",
        "end endpos expand group groupdict groups lastgroup lastindex pos re regs span start "
        "string",
        "the groups and span of a match, and the pattern and string it came from",
    ),
    Row(
        "re.Pattern",
        "findall finditer flags fullmatch groupindex groups match pattern scanner search split "
        "sub subn",
        "a compiled regular expression: matching, splitting, substituting",
    ),
    Row(
        "re.error",
        "colno lineno msg pattern pos",
        "where and why a pattern failed to compile",
    ),
    Row(
        "statistics",
        "NormalDist StatisticsError correlation covariance fmean geometric_mean harmonic_mean "
        "linear_regression mean median median_grouped median_high median_low mode multimode "
        "pstdev pvariance quantiles stdev variance",
        "arithmetic over the numbers the script passes",
    ),
    Row(
        "statistics.NormalDist",
        "cdf from_samples inv_cdf mean median mode overlap pdf quantiles samples stdev variance "
        "zscore",
        "arithmetic on a normal distribution's two numbers",
    ),
    Row(
        "string",
        "Template ascii_letters ascii_lowercase ascii_uppercase capwords digits hexdigits "
        "octdigits printable punctuation whitespace",
        "constants, capwords and Template",
    ),
    Row(
        "string.Template",
        "braceidpattern delimiter flags get_identifiers idpattern is_valid pattern "
        "safe_substitute substitute template",
        "$-substitution by item lookup in the mapping given (no attribute access)",
    ),
    Row(
        "textwrap",
        "TextWrapper dedent fill indent shorten wrap",
        "text wrapping over the text the script passes",
    ),
    Row(
        "textwrap.TextWrapper",
        "break_long_words break_on_hyphens drop_whitespace expand_tabs fill fix_sentence_endings "
        "initial_indent max_lines placeholder replace_whitespace sentence_end_re "
        "subsequent_indent tabsize unicode_whitespace_trans width wordsep_re wordsep_simple_re "
        "wrap",
        "wraps text by its options, which are plain data",
    ),
    Row(
        "asyncio",
        "gather run sleep",
        "the async dialect's own asyncio (sandbox._dialect), not the module: gather makes the "
        "pending tool calls it is given as one batch, sleep sleeps within the wall time, run "
        "hands back what it is given; no event loop, coroutine or thread exists",
    ),
    Row(
        "time",
        "monotonic monotonic_ns perf_counter perf_counter_ns process_time process_time_ns time "
        "time_ns",
        "clocks only: they read the time and nothing else",
    ),
    Row(
        "time.struct_time",
        "n_fields n_sequence_fields n_unnamed_fields tm_gmtoff tm_hour tm_isdst tm_mday tm_min "
        "tm_mon tm_sec tm_wday tm_yday tm_year tm_zone",
        "the fields of a broken-down time",
    ),
)
"""Every name a script can reach; see the module docstring."""


def allowed_pairs() -> frozenset[tuple[str, str]]:
    """Every (owner, name) pair of :data:`SURFACE`."""
    return frozenset(pair for row in SURFACE for pair in row.split())


def names_of(owner: str) -> tuple[str, ...]:
    """The names :data:`SURFACE` lists for ``owner``, in table order."""
    return tuple(name for row in SURFACE if row.owner == owner for _, name in row.split())
