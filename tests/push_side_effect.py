"""A module that checking a push target must never import (it is on no allow-list): importing it raises, as a
module with side effects would have done something by then."""

raise RuntimeError("tests.push_side_effect was imported: a push target not on the allow-list must not be imported")
