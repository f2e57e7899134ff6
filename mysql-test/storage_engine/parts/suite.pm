package My::Suite::TidesDB_storage_engine;
@ISA = qw(My::Suite);

# The plugin declares itself experimental; the server says so at every start.
push @::global_suppressions,
  (
     qr(Plugin 'TidesDB' is of maturity level experimental while the server is stable),
  );

bless { };
