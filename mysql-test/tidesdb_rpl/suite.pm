package My::Suite::TidesDB_rpl;
@ISA = qw(My::Suite);

# The plugin is experimental on purpose (suite.opt loads it with
# --plugin-maturity=experimental); the server says so at every start.
push @::global_suppressions,
  (
     qr(Plugin 'TidesDB' is of maturity level experimental while the server is stable),
  );

bless { };
