-- The five TPC-C transactions as templates (one order line, one item: the analysis is per statement shape).

-- transaction: new_order
SELECT w_ytd FROM warehouse WHERE w_id = ?;
SELECT c_balance FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?;
-- the order id: D_NEXT_O_ID read and incremented (deferred to commit, this is the one atomic increment)
UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ? AND d_id = ?;
INSERT INTO orders (o_w_id, o_d_id, o_id, o_c_id, o_carrier_id, o_ol_cnt) VALUES (?, ?, ?, ?, NULL, ?);
INSERT INTO new_order (no_w_id, no_d_id, no_o_id) VALUES (?, ?, ?);
SELECT i_price FROM item WHERE i_id = ?;
UPDATE stock SET s_quantity = s_quantity - ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ?
  WHERE s_w_id = ? AND s_i_id = ?;
INSERT INTO order_line (ol_w_id, ol_d_id, ol_o_id, ol_number, ol_i_id, ol_supply_w_id, ol_delivery_d, ol_amount)
  VALUES (?, ?, ?, ?, ?, ?, NULL, ?);

-- transaction: payment
UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?;
UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?;
UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1
  WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?;
INSERT INTO history (h_c_w_id, h_c_d_id, h_c_id, h_w_id, h_d_id, h_amount) VALUES (?, ?, ?, ?, ?, ?);

-- transaction: order_status
SELECT c_balance FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?;
SELECT o_id, o_carrier_id FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ?;
SELECT ol_i_id, ol_amount, ol_delivery_d FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?;

-- transaction: delivery
SELECT MIN(no_o_id) FROM new_order WHERE no_w_id = ? AND no_d_id = ?;
DELETE FROM new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?;
UPDATE orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?;
UPDATE order_line SET ol_delivery_d = ? WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?;
UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1
  WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?;

-- transaction: stock_level
SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?;
SELECT COUNT(*) FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id >= ?;
SELECT s_quantity FROM stock WHERE s_w_id = ? AND s_i_id = ? AND s_quantity < ?;
