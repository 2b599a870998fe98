"""The package's version, in a module of its own so that any module of the
package can read it without importing the package's root."""

__version__ = "0.1.0.dev0"
