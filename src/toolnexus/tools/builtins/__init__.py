"""Built-in coding tools (in progress: see issue 5).

Done so far, in private modules with tests: ``read``, ``write``, ``edit``, ``glob``
(``_files.py``), ``grep`` (``_grep.py``), ``bash``, ``bash_output``, ``kill_shell``
(``_shell.py``), ``todowrite``, ``question`` (``_session.py``). ``builtin_tools()`` is exported
once ``apply_patch``, ``notebook_edit``, ``webfetch`` and ``websearch`` exist too.
"""
