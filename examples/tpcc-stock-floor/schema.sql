-- TPC-C's schema (examples/tpcc/schema.sql) with one invariant added that is not invariant-confluent:
-- CHECK (s_quantity >= 10) on STOCK, with New-Order decrementing the quantity without TPC-C's restocking.
-- `snowline analyze` then says New-Order needs serializable execution; a coordination-free run given these
-- verdicts (--tpcc-verdicts) keeps the floor with bounded decrements checked at each stock row's owner.
-- TPC-C (the columns the transactions and the consistency conditions use) with its twelve consistency
-- conditions (TPC-C 5.11, clause 3.3.2.x) as constraints and annotations, named cc1..cc12.
-- `snowline analyze examples/tpcc/schema.sql --transactions examples/tpcc/transactions.sql`
--
-- How each condition is stated, following the classification of Bailis et al. (VLDB 2015, §6.2):
--   materialized state (1, 8, 9, 10, 12): @view over @counter columns;
--   sequential ids (2, 3): @sequence from the district's D_NEXT_O_ID counter;
--   foreign keys (4, 5, 6, 7, 11): the reference whose visibility the condition depends on (the paper keeps
--   them by making each transaction's inserts atomically visible). The conditions 4, 6, 7 and 11 count rows
--   per order or per district; what the analyzer can check of them is the reference they rest on.
-- Grouping (per warehouse, district or customer) is not stated: a view sums whole tables.

CREATE TABLE warehouse (
  w_id  INT PRIMARY KEY,
  w_ytd INT NOT NULL
);

CREATE TABLE district (
  d_w_id      INT NOT NULL,
  d_id        INT NOT NULL,
  d_ytd       INT NOT NULL,
  d_next_o_id INT NOT NULL,
  PRIMARY KEY (d_w_id, d_id),
  FOREIGN KEY (d_w_id) REFERENCES warehouse (w_id)
);

CREATE TABLE customer (
  c_w_id         INT NOT NULL,
  c_d_id         INT NOT NULL,
  c_id           INT NOT NULL,
  c_balance      INT NOT NULL,
  c_ytd_payment  INT NOT NULL,
  c_payment_cnt  INT NOT NULL,
  c_delivery_cnt INT NOT NULL,
  PRIMARY KEY (c_w_id, c_d_id, c_id),
  FOREIGN KEY (c_w_id, c_d_id) REFERENCES district (d_w_id, d_id)
);

CREATE TABLE history (
  h_c_w_id INT NOT NULL,
  h_c_d_id INT NOT NULL,
  h_c_id   INT NOT NULL,
  h_w_id   INT NOT NULL,
  h_d_id   INT NOT NULL,
  h_amount INT NOT NULL,
  -- 3.3.2.11 (here: every payment belongs to an existing customer)
  CONSTRAINT cc11_history_customer FOREIGN KEY (h_c_w_id, h_c_d_id, h_c_id)
    REFERENCES customer (c_w_id, c_d_id, c_id)
);

CREATE TABLE item (
  i_id    INT PRIMARY KEY,
  i_price INT NOT NULL
);

CREATE TABLE stock (
  s_w_id       INT NOT NULL,
  s_i_id       INT NOT NULL,
  s_quantity   INT NOT NULL,
  s_ytd        INT NOT NULL,
  s_order_cnt  INT NOT NULL,
  s_remote_cnt INT NOT NULL,
  PRIMARY KEY (s_w_id, s_i_id),
  -- Not in TPC-C: a floor on stock, kept without the specification's restocking (+91 below 10).
  CONSTRAINT s_quantity_floor CHECK (s_quantity >= 10),
  FOREIGN KEY (s_i_id) REFERENCES item (i_id)
);

CREATE TABLE orders (
  o_w_id       INT NOT NULL,
  o_d_id       INT NOT NULL,
  o_id         INT NOT NULL,
  o_c_id       INT NOT NULL,
  o_carrier_id INT,
  o_ol_cnt     INT NOT NULL,
  PRIMARY KEY (o_w_id, o_d_id, o_id),
  -- 3.3.2.6 (here: an order's customer exists)
  CONSTRAINT cc6_order_customer FOREIGN KEY (o_w_id, o_d_id, o_c_id) REFERENCES customer (c_w_id, c_d_id, c_id)
);

CREATE TABLE new_order (
  no_w_id INT NOT NULL,
  no_d_id INT NOT NULL,
  no_o_id INT NOT NULL,
  PRIMARY KEY (no_w_id, no_d_id, no_o_id),
  -- 3.3.2.5: a NEW-ORDER row exists for an undelivered ORDER (deleting the order removes it)
  CONSTRAINT cc5_new_order_order FOREIGN KEY (no_w_id, no_d_id, no_o_id)
    REFERENCES orders (o_w_id, o_d_id, o_id) ON DELETE CASCADE
);

CREATE TABLE order_line (
  ol_w_id        INT NOT NULL,
  ol_d_id        INT NOT NULL,
  ol_o_id        INT NOT NULL,
  ol_number      INT NOT NULL,
  ol_i_id        INT NOT NULL,
  ol_supply_w_id INT NOT NULL,
  ol_delivery_d  INT,
  ol_amount      INT NOT NULL,
  PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number),
  -- 3.3.2.4: order lines belong to an order (sum of O_OL_CNT = number of ORDER-LINE rows)
  CONSTRAINT cc4_line_order FOREIGN KEY (ol_w_id, ol_d_id, ol_o_id) REFERENCES orders (o_w_id, o_d_id, o_id),
  -- 3.3.2.7 (here: an order line's item is stocked by its supplying warehouse)
  CONSTRAINT cc7_line_stock FOREIGN KEY (ol_supply_w_id, ol_i_id) REFERENCES stock (s_w_id, s_i_id)
);

-- Counters: changed only by increments and decrements, merged by adding.
-- @counter warehouse.w_ytd, district.d_ytd, district.d_next_o_id
-- @counter customer.c_balance, customer.c_ytd_payment, customer.c_payment_cnt, customer.c_delivery_cnt
-- @counter stock.s_quantity, stock.s_ytd, stock.s_order_cnt, stock.s_remote_cnt

-- 3.3.2.1: W_YTD = sum(D_YTD)
-- @view cc1_w_ytd_districts: warehouse.w_ytd = SELECT SUM(d_ytd) FROM district
-- 3.3.2.2: D_NEXT_O_ID - 1 = max(O_ID), ids sequential
-- @sequence cc2_order_ids: orders.o_id BY district.d_next_o_id
-- 3.3.2.3: max(NO_O_ID) - min(NO_O_ID) + 1 = number of NEW-ORDER rows (and D_NEXT_O_ID - 1 = max(NO_O_ID))
-- @sequence cc3_new_order_ids: new_order.no_o_id BY district.d_next_o_id
-- 3.3.2.8: W_YTD = sum(H_AMOUNT)
-- @view cc8_w_ytd_history: warehouse.w_ytd = SELECT SUM(h_amount) FROM history
-- 3.3.2.9: D_YTD = sum(H_AMOUNT)
-- @view cc9_d_ytd_history: district.d_ytd = SELECT SUM(h_amount) FROM history
-- 3.3.2.10: C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT); its payment side:
-- @view cc10_c_ytd_payment: customer.c_ytd_payment = SELECT SUM(h_amount) FROM history
-- 3.3.2.12: C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT) of delivered order lines
-- @view cc12_c_balance: customer.c_balance + customer.c_ytd_payment = SELECT SUM(ol_amount) FROM order_line WHERE ol_delivery_d IS NOT NULL
